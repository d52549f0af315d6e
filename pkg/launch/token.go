package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/symmem/symmem/pkg/launch/store"
)

// ErrNoSecret is the refusal of a multi-host job that has no shared token.
var ErrNoSecret = errors.New(`a job over several hosts needs a secret so that no one else can join it: ` +
	`export SYMMEM_STORE_TOKEN=$(head -c16 /dev/urandom | xxd -p) before srun or mpirun (they pass the environment on), ` +
	`or point SYMMEM_STORE_TOKEN_FILE at a file only you can read`)

// token settles how this rank proves to the store that it belongs to the job:
// SYMMEM_STORE_TOKEN, else the file SYMMEM_STORE_TOKEN_FILE names, else (one host only)
// a token rank 0 makes and leaves in a file only this user can read.
func token(info *RankInfo, env envReader) error {
	if t := strings.TrimSpace(env.get(EnvStoreToken)); t != "" {
		info.Token, info.TokenFrom = t, EnvStoreToken
		return nil
	}
	if f := env.get(EnvStoreTokenFile); f != "" {
		t, err := ReadTokenFile(f)
		info.Token, info.TokenFrom = t, EnvStoreTokenFile
		return err
	}
	if info.MultiHost {
		return ErrNoSecret
	}
	dir, err := privateDir()
	if err != nil {
		return err
	}
	info.TokenFile = filepath.Join(dir, "job-"+strings.NewReplacer("/", "_", " ", "_").Replace(info.JobID)+".token")
	if info.Rank == 0 {
		info.Token = store.NewToken()
	}
	return nil
}

// ReadTokenFile reads a token from a file that only its owner, this user, can read.
func ReadTokenFile(path string) (string, error) {
	if err := private(path, false); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("store token file %s is empty", path)
	}
	return t, nil
}

// WriteTokenFile leaves token in path for the other ranks of a one-host job, replacing
// any file of an earlier job atomically. owner (a line naming rank 0's process) lets a
// rank that finds rank 0 stopped before it could greet it end rank 0 all the same.
func WriteTokenFile(path, token, owner string) error {
	tmp := path + ".new"
	err := os.WriteFile(tmp, []byte(token+"\n"+owner+"\n"), 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the store token: %w; %s", err, tokenDirAdvice)
	}
	return nil
}

// tokenDirAdvice is what to do when the token directory cannot take rank 0's file.
const tokenDirAdvice = "set TMPDIR to a directory you can write, or give every rank the same " + EnvStoreToken

// ReadJobToken reads the token and its owner from a file WriteTokenFile wrote.
func ReadJobToken(path string) (token, owner string, err error) {
	t, err := ReadTokenFile(path)
	if err != nil {
		return "", "", err
	}
	token, owner, _ = strings.Cut(t, "\n")
	return strings.TrimSpace(token), strings.TrimSpace(owner), nil
}

// RemoveTokenFile removes the token file rank 0 left for the other ranks, unless it
// holds another token: a later job of the same ID replaced it.
func RemoveTokenFile(path, token string) {
	if t, _, err := ReadJobToken(path); err == nil && t == token {
		os.Remove(path)
	}
}

// privateDir is this user's directory for token files, readable by no one else.
func privateDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("symmem-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("store token directory: %w; %s", err, tokenDirAdvice)
	}
	return dir, private(dir, true)
}

// private checks that path belongs to this user and that no one else can read it.
func private(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("store token: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case dir && !fi.IsDir(), !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("store token: %s is not a plain %s", path, map[bool]string{true: "directory", false: "file"}[dir])
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("store token: %s belongs to uid %d, not to you (uid %d)", path, st.Uid, os.Getuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("store token: %s can be read by others (mode %o): chmod go-rwx %s", path, fi.Mode().Perm(), path)
	}
	return nil
}
