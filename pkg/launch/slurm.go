package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// ExpandNodeList expands a Slurm node list such as "gpu[01-04,07],login1" into host
// names, in order ("gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"). Ranges keep
// their zero padding; several bracket groups in one name are expanded in turn.
func ExpandNodeList(list string) ([]string, error) {
	var hosts []string
	for _, item := range splitTop(list) {
		if item == "" {
			return nil, fmt.Errorf("empty host name in node list")
		}
		names, err := expandName(item)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, names...)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("node list is empty")
	}
	return hosts, nil
}

// splitTop splits at commas outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func expandName(name string) ([]string, error) {
	open := strings.IndexByte(name, '[')
	if open < 0 {
		if strings.ContainsAny(name, "]") {
			return nil, fmt.Errorf("%q: unmatched ']'", name)
		}
		return []string{name}, nil
	}
	end := strings.IndexByte(name[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: unmatched '['", name)
	}
	end += open
	prefix, body, rest := name[:open], name[open+1:end], name[end+1:]
	tails, err := expandName(rest)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, found := strings.Cut(part, "-")
		if !found {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a > b || lo == "" {
			return nil, fmt.Errorf("%q: bad range %q", name, part)
		}
		if b-a > 100000 {
			return nil, fmt.Errorf("%q: range %q is too large", name, part)
		}
		for n := a; n <= b; n++ {
			num := strconv.Itoa(n)
			if len(num) < len(lo) {
				num = strings.Repeat("0", len(lo)-len(num)) + num
			}
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}

// ExpandTasksPerNode expands Slurm's SLURM_TASKS_PER_NODE ("2(x3),1") into the task
// count of each node in order ([2, 2, 2, 1]).
func ExpandTasksPerNode(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		count, times := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			count, times = part[:i], part[i+2:len(part)-1]
		}
		n, err1 := strconv.Atoi(count)
		k, err2 := strconv.Atoi(times)
		if err1 != nil || err2 != nil || n < 1 || k < 1 || k > 100000 {
			return nil, fmt.Errorf("bad entry %q (want N or N(xK))", part)
		}
		for ; k > 0; k-- {
			out = append(out, n)
		}
	}
	return out, nil
}
