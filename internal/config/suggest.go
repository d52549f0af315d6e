package config

import "strings"

// Nearest returns the candidate closest to word, or "" when none is close enough to be
// what was meant: within two edits (a swap of neighbours is one: NPORC -> NPROC), and
// within a third of the word's length for short words, or a candidate the word starts
// or ends.
func Nearest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := distance(w, strings.ToLower(c))
		if d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	limit := 2
	if len(w) <= 4 {
		limit = 1
	}
	if bestD <= limit {
		return best
	}
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if len(w) >= 3 && (strings.HasPrefix(lc, w) || strings.HasPrefix(w, lc) && len(lc) >= 3) {
			return c
		}
	}
	return ""
}

// suggest is "did you mean X?" for the nearest candidate, or fallback.
func suggest(word string, candidates []string, fallback string) string {
	if n := Nearest(word, candidates); n != "" {
		return "did you mean " + n + "?"
	}
	return fallback
}

// distance is the optimal string alignment distance: insertions, deletions,
// substitutions and swaps of adjacent letters each cost one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
