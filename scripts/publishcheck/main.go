// Command publishcheck packs the repository's published modules into a
// module proxy on the file system, as a module proxy would serve them after
// a release, so that a build outside the repository can install them
// without the network (see scripts/publish-check.sh).
//
//	publishcheck -version V -out DIR [-repo ROOT] MODULE_DIR...
//
// Each MODULE_DIR (relative to ROOT, "." for the root module) is packed at
// version V with the files git would publish: tracked files and untracked
// ones that are not ignored, as they are in the work tree, without the
// directories of nested modules, and with the repository's LICENSE in a
// nested module that has none, as the go command packs a module from its
// repository. A requirement of one of the packed modules at a release
// version (vX.Y.Z other than v0.0.0) is rewritten to V, so the packed
// modules require one another as the release will. Any other
// version of them is left alone: a build that needs it fails, as it would
// for a user.
//
// A published go.mod with replace directives is packed, then reported, and
// the exit status is 1: a replace directive is ignored in a dependency, so
// the module would not build for its users the way it builds here.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the repository's root directory")
	version := flag.String("version", "", "the `version` to pack every module at")
	out := flag.String("out", "", "the module proxy `directory` to write")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: publishcheck -version V -out DIR [-repo ROOT] MODULE_DIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*repo, *version, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "publishcheck:", err)
		os.Exit(1)
	}
}

// A mod is one module to pack.
type mod struct {
	dir  string // relative to the repository, slash-separated
	file *modfile.File
}

func run(repo, version, out string, dirs []string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-version %q is not a canonical semantic version such as v1.2.3 or v1.2.3-pre.1", version)
	}
	var mods []mod
	packed := make(map[string]bool)
	for _, dir := range dirs {
		dir = path.Clean(filepath.ToSlash(dir))
		name := filepath.Join(repo, filepath.FromSlash(dir), "go.mod")
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s: no module line", name)
		}
		mods = append(mods, mod{dir: dir, file: f})
		packed[f.Module.Mod.Path] = true
	}
	var problems []string
	for _, m := range mods {
		if err := pack(repo, version, out, m, packed); err != nil {
			return err
		}
		for _, r := range m.file.Replace {
			problems = append(problems, fmt.Sprintf("%s/go.mod: replace %s: a replace directive is ignored in a dependency, so its users would build without it", m.dir, r.Old.Path))
		}
		fmt.Printf("%s %s\n", m.file.Module.Mod.Path, version)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// pack writes the zip, go.mod, info and list files of module m at version
// to the proxy directory out.
func pack(repo, version, out string, m mod, packed map[string]bool) error {
	mv := module.Version{Path: m.file.Module.Mod.Path, Version: version}
	// The file is reparsed so that rewriting it leaves m.file as read.
	orig, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(m.dir), "go.mod"))
	if err != nil {
		return err
	}
	f, err := modfile.Parse(m.dir+"/go.mod", orig, nil)
	if err != nil {
		return err
	}
	for _, r := range f.Require {
		if packed[r.Mod.Path] && isRelease(r.Mod.Version) {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return err
			}
		}
	}
	gomod, err := f.Format()
	if err != nil {
		return err
	}
	files, err := moduleFiles(repo, m.dir, gomod)
	if err != nil {
		return err
	}
	esc, err := module.EscapePath(mv.Path)
	if err != nil {
		return err
	}
	escVer, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var zipBuf bytes.Buffer
	if err := modzip.Create(&zipBuf, mv, files); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		escVer + ".zip":  zipBuf.Bytes(),
		escVer + ".mod":  gomod,
		escVer + ".info": info,
		"list":           []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// isRelease reports whether v names a release that a sibling module may
// require: vX.Y.Z without pre-release or build, other than v0.0.0, which
// stands for no version at all.
func isRelease(v string) bool {
	return semver.IsValid(v) && semver.Canonical(v) == v && semver.Prerelease(v) == "" && v != "v0.0.0"
}

// moduleFiles lists the files git would publish in the module at dir:
// tracked and untracked files that are not ignored, present in the work
// tree. go.mod is served with the content gomod. Create leaves out the
// files of nested modules.
func moduleFiles(repo, dir string, gomod []byte) ([]modzip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	cmd.Dir = filepath.Join(repo, filepath.FromSlash(dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	listed, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %v: %s", cmd.Dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var files []modzip.File
	seen := make(map[string]bool)
	for _, p := range strings.Split(string(listed), "\x00") {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		if p == "go.mod" {
			files = append(files, memFile{name: p, data: gomod})
			continue
		}
		full := filepath.Join(cmd.Dir, filepath.FromSlash(p))
		info, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		files = append(files, diskFile{name: p, full: full, info: info})
	}
	// A nested module without a LICENSE gets the repository's, as the go
	// command packs a module from its repository.
	if dir != "." && !seen["LICENSE"] {
		full := filepath.Join(repo, "LICENSE")
		if info, err := os.Lstat(full); err == nil && info.Mode().IsRegular() {
			files = append(files, diskFile{name: "LICENSE", full: full, info: info})
		}
	}
	return files, nil
}

// diskFile is a module file read from the work tree.
type diskFile struct {
	name, full string
	info       fs.FileInfo
}

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.full) }

// memFile is a module file whose content is given.
type memFile struct {
	name string
	data []byte
}

func (f memFile) Path() string                 { return f.name }
func (f memFile) Lstat() (fs.FileInfo, error)  { return memInfo{f}, nil }
func (f memFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type memInfo struct{ f memFile }

func (i memInfo) Name() string       { return path.Base(i.f.name) }
func (i memInfo) Size() int64        { return int64(len(i.f.data)) }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
