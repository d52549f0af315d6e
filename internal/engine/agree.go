package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/symmem/symmem/internal/setting"
)

// Under an external launcher every rank builds the job from its own command line and
// environment (mpirun's MPMD form, per-node settings), so two ranks can be given two
// jobs: rank 0 `run put` and rank 1 `run get` both exited 0 over an empty table, and
// --count 8 against --count 16 was called wrong data. agree makes the ranks compare
// their jobs through the store before anything runs: each rank leaves its settings
// there, every other rank compares its own with rank 0's, and rank 0 with all of
// theirs; a difference is bad input (exit 2) on both sides, named setting by setting.

// agreeSkip are the job's settings that may differ between ranks: library paths and
// kernel directories are per host, the wait limits each rank's own, a note only words.
var agreeSkip = map[string]bool{"backend_note": true, "nvshmem_lib": true, "nccl_lib": true, "kernels_dir": true,
	"wait_limit": true, "stall_limit": true, "nproc": true, "words": true}

// agreeWake is what a rank that disagrees adds to the count rank 0 waits on, so that
// rank 0 stops waiting for the ranks still to come and names the difference at once.
const agreeWake = 1 << 40

// agree compares this rank's job with the others'; see above.
func (r *rank) agree(ctx context.Context, j Job) error {
	mine := jobSettings(r.info.WorldSize, j)
	b, err := json.Marshal(mine)
	if err != nil {
		return err
	}
	me := r.info.Rank
	if err := r.store.Set(ctx, "agree/"+strconv.Itoa(me), b); err != nil {
		return err
	}
	if me != 0 {
		theirs, err := r.settingsOf(ctx, 0)
		if err != nil {
			return err
		}
		if d, ok := differences(mine, theirs, 0); ok {
			// Told apart from a rank that died: rank 0 hears the difference from here,
			// and the abort it then sends is not this rank's to report.
			r.stopWatch()
			r.store.Add(ctx, "agree/n", agreeWake)
			r.store.Leave(ctx)
			return badInput("rank %d was given another job than rank 0: %s; start every rank with the same command and settings", me, d)
		}
		_, err = r.store.Add(ctx, "agree/n", 1)
		return err
	}
	if err := r.store.WaitCount(ctx, "agree/n", int64(r.info.WorldSize-1)); err != nil {
		return err
	}
	var all []setting.Text
	for k := 1; k < r.info.WorldSize; k++ {
		v, ok := r.server.Value("agree/" + strconv.Itoa(k))
		if !ok {
			continue // not there yet: a rank that disagrees woke this one
		}
		var theirs map[string]string
		if json.Unmarshal(v, &theirs) != nil {
			all = append(all, setting.Textf("rank %d sent settings that do not read", k))
			continue
		}
		if d, ok := differences(mine, theirs, k); ok {
			all = append(all, setting.Textf("rank %d: %s", k, d))
		}
	}
	if len(all) == 0 {
		return nil
	}
	diffs := joinTexts(all)
	// The other ranks print it as it is: worded here.
	why := "the ranks were given different jobs: " + r.words.Sprintf("%s", diffs)
	r.stopWatch()
	r.server.Set("abort/why", []byte(why))
	r.server.Add("abort", 1)
	return badInput("rank 0: %s; start every rank with the same command and settings", diffs)
}

// settingsOf waits for rank k's settings.
func (r *rank) settingsOf(ctx context.Context, k int) (map[string]string, error) {
	v, err := r.store.Get(ctx, "agree/"+strconv.Itoa(k))
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("rank %d's settings do not read (%v): is it the same symmem?", k, err)
	}
	return m, nil
}

// jobSettings is the job as settings, "run.count" -> "8", with the world size.
func jobSettings(worldSize int, j Job) map[string]string {
	out := map[string]string{"world_size": strconv.Itoa(worldSize)}
	b, _ := json.Marshal(j)
	// Numbers as written (1048576), not as float64 (1.048576e+06): they are shown.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	dec.Decode(&m)
	for k := range agreeSkip {
		delete(m, k)
	}
	flatten("", m, out)
	delete(out, "run.bytes") // --count times the --dtype's size, each compared
	return out
}

func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			flatten(prefix+k+".", e, out)
		}
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = fmt.Sprint(e)
		}
		out[strings.TrimSuffix(prefix, ".")] = strings.Join(parts, ",")
	default:
		out[strings.TrimSuffix(prefix, ".")] = fmt.Sprint(t)
	}
}

// differences names each setting in which mine and rank k's differ, by value: "--count
// 8 here, 16 on rank 1" on the command line; ok is false where none does.
func differences(mine, theirs map[string]string, k int) (d setting.Text, ok bool) {
	keys := map[string]bool{}
	for key := range mine {
		keys[key] = true
	}
	for key := range theirs {
		keys[key] = true
	}
	var diffs []setting.Text
	for key := range keys {
		a, b := or(mine[key], "unset"), or(theirs[key], "unset")
		if a != b {
			diffs = append(diffs, setting.Textf("%v %s here, %s on rank %d", settingName(key), a, b, k))
		}
	}
	if len(diffs) == 0 {
		return setting.Text{}, false
	}
	slices.SortFunc(diffs, func(a, b setting.Text) int { return strings.Compare(a.String(), b.String()) })
	return joinTexts(diffs), true
}

// joinTexts is ts one after the other, "; " between.
func joinTexts(ts []setting.Text) setting.Text {
	a := make([]any, len(ts))
	for i, t := range ts {
		a[i] = t
	}
	return setting.Textf(strings.TrimSuffix(strings.Repeat("%s; ", len(ts)), "; "), a...)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// settingName is the setting (or variable) a job setting comes from: a setting.Name,
// for the presenter to word, or what says it where it is none.
func settingName(key string) any {
	switch key {
	case "world_size":
		return "the world size (WORLD_SIZE, or the launcher's -n)"
	case "kind":
		return "the command (run or bench)"
	case "run.op":
		return "the operation"
	case "bench.ops":
		return setting.Op
	case "bench.impls":
		return setting.Impl
	case "heap":
		return setting.HeapSize
	}
	// The last part of the key, as JSON names it: a snake-case tag (per_iter_max) or,
	// for backend.Launch's untagged fields, the Go name (Impl).
	last := strings.ToLower(key[strings.LastIndex(key, ".")+1:])
	if n, ok := setting.Lookup(strings.ReplaceAll(last, "_", "-")); ok {
		return n
	}
	return strings.ReplaceAll(last, "_", "-")
}
