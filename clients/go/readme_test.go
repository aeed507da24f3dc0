package fenceq

// README.md's code blocks: every go block that is not marked
// `<!-- doctest: skip (reason) -->` (the marker scripts/doctest_readme.py
// reads) is a whole program, run with `go run` against a fresh server-clock
// daemon that FENCEQ_ENDPOINT names. Every block of another language must
// carry the marker.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

type readmeBlock struct {
	line int
	lang string
	code string
	skip bool
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	marker := regexp.MustCompile(`^<!--\s*doctest:\s*skip\s*\(.+\)\s*-->$`)
	var blocks []readmeBlock
	var cur *readmeBlock
	skipNext := false
	scanner := bufio.NewScanner(f)
	for n := 1; scanner.Scan(); n++ {
		line := scanner.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{line: n, lang: strings.TrimPrefix(line, "```"), skip: skipNext}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
		if cur == nil || cur.line != n {
			skipNext = marker.MatchString(strings.TrimSpace(line))
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: a block is not closed", cur.line)
	}
	return blocks
}

func TestReadmeQuickStart(t *testing.T) {
	ran := 0
	for _, b := range readmeBlocks(t) {
		if b.skip {
			continue
		}
		if b.lang != "go" {
			t.Fatalf("README.md:%d: a %q block without a doctest skip marker", b.line, b.lang)
		}
		ran++
		out := goRun(t, b.code)
		if !strings.Contains(out, "applied: false") || !strings.Contains(out, "done sent (trace 4bf92f35)") {
			t.Fatalf("README.md:%d: printed %q", b.line, out)
		}
	}
	if ran == 0 {
		t.Fatal("README.md has no go block to run")
	}
}

// goRun runs a program with the client as a dependency: in the offline
// workspace when GOWORK names one (clients/go/offline.sh: the workspace's
// module provides the package, no require needed), else in a module that
// requires the client and replaces it with this folder (go fetches the rest).
func goRun(t *testing.T, code string) string {
	t.Helper()
	d := startDaemon(t, "server")
	dir := shortDir(t)
	here, _ := filepath.Abs(".")
	modFile := "module readmequickstart\n\ngo 1.19\n"
	env := append(os.Environ(), "FENCEQ_ENDPOINT="+d.endpoint)
	args := []string{"run", "."}
	if work := os.Getenv("GOWORK"); work != "" && work != "off" {
		body, err := os.ReadFile(work)
		if err != nil {
			t.Fatal(err)
		}
		workFile := filepath.Join(dir, "go.work")
		write(t, workFile, string(body)+fmt.Sprintf("\nuse %q\n", filepath.Join(dir, "prog")))
		env = append(env, "GOWORK="+workFile)
	} else {
		modFile += "\nrequire github.com/fenceq/fenceq/clients/go v0.0.0\n" +
			fmt.Sprintf("\nreplace github.com/fenceq/fenceq/clients/go => %s\n", here)
		sum, _ := os.ReadFile("go.sum")
		write(t, filepath.Join(dir, "prog", "go.sum"), string(sum))
		args = []string{"run", "-mod=mod", "."}
	}
	write(t, filepath.Join(dir, "prog", "go.mod"), modFile)
	write(t, filepath.Join(dir, "prog", "main.go"), code)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(dir, "prog")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	return string(out)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
