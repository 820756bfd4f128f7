package metrics

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
	"golang.org/x/sys/unix"
)

// maxWebFile bounds the files a web configuration names, which
// brokertrace reads whole, as root: /dev/zero given as one would be read
// until memory runs out.
const maxWebFile = 1 << 20

// webConfig is a checked web configuration file, copied for the toolkit.
type webConfig struct {
	copy *os.File // a memfd; nil for plain HTTP
	path string   // where the toolkit reads copy
	tls  bool     // whether it turns HTTPS on
}

// CheckWebConfig reads a web configuration file as Listen will: its YAML,
// the bcrypt hashes of its users, its certificate and key, so that a bad
// file is a flag's error before anything starts. The error is one line;
// tls is whether the file turns HTTPS on. An empty path is plain HTTP.
func CheckWebConfig(path string) (tls bool, err error) {
	wc, err := loadWebConfig(path)
	if err != nil {
		return false, err
	}
	wc.remove()
	return wc.tls, nil
}

// loadWebConfig checks the file at path and copies it, with the
// certificate, key and client CA it names read in, into a file in memory
// for the toolkit to serve from. The toolkit rereads its files
// at every request and handshake, reads them whole and quotes what does
// not parse in its errors: given the user's paths, a file swapped after
// the check (a symlink pointed at /etc/shadow, at /dev/zero) would have
// root print it, or read it until memory runs out.
func loadWebConfig(path string) (*webConfig, error) {
	if path == "" {
		return &webConfig{}, nil
	}
	wc, err := copyWebConfig(path)
	if err != nil {
		return nil, fmt.Errorf("web config %s: %s", path, strings.Join(strings.Fields(err.Error()), " "))
	}
	return wc, nil
}

func copyWebConfig(path string) (*webConfig, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	var c web.Config // parsed as the toolkit parses it
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, yamlError(err)
	}
	wc := &webConfig{tls: c.TLSConfig.IsEnabled()}
	if wc.copy, err = writeCopy(b, filepath.Dir(path)); err != nil {
		return nil, err
	}
	wc.path = fmt.Sprintf("/proc/self/fd/%d", wc.copy.Fd())
	if err := web.Validate(wc.path); err != nil {
		wc.remove()
		if strings.HasPrefix(err.Error(), "crypto/bcrypt:") { // which says not where
			err = fmt.Errorf("basic_auth_users: a password is not a bcrypt hash (%w)", err)
		}
		return nil, err
	}
	return wc, nil
}

func (wc *webConfig) remove() {
	if wc.copy != nil {
		wc.copy.Close()
	}
}

// readSmall reads the regular file at path, of at most maxWebFile bytes;
// its errors do not repeat the path. It looks before it opens, and opens
// without blocking, so that a FIFO or a device given as a file is refused,
// not waited for.
func readSmall(path string) ([]byte, error) {
	b, err := readRegular(path)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return b, err
}

func readRegular(path string) ([]byte, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	case st.Size() > maxWebFile:
		return nil, fmt.Errorf("larger than %d bytes", maxWebFile)
	}
	return io.ReadAll(io.LimitReader(f, maxWebFile))
}

// inlined are the keys of tls_server_config that name files, and the
// keys that hold their contents instead.
var inlined = map[string]string{"cert_file": "cert", "key_file": "key", "client_ca_file": "client_ca"}

// writeCopy writes the web configuration b, with the files its
// tls_server_config names (relative to dir) read in, into a memfd: the
// copy holds the key and the hashes, and leaves nothing on disk, even
// should brokertrace be killed.
func writeCopy(b []byte, dir string) (*os.File, error) {
	var m yaml.MapSlice
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for i, item := range m {
		if t, ok := item.Value.(yaml.MapSlice); ok && item.Key == "tls_server_config" {
			var err error
			if m[i].Value, err = inlineFiles(t, dir); err != nil {
				return nil, err
			}
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("brokertrace-web.yml", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "brokertrace-web.yml")
	if _, err := f.Write(out); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// inlineFiles replaces the files t names by their contents, each read as
// a small regular file. An inline value beside its file is dropped: the
// toolkit would have read the file.
func inlineFiles(t yaml.MapSlice, dir string) (yaml.MapSlice, error) {
	fromFile := map[string]bool{}
	for _, f := range t {
		if key, _ := f.Key.(string); f.Value != "" && f.Value != nil && inlined[key] != "" {
			fromFile[inlined[key]] = true
		}
	}
	var out yaml.MapSlice
	for _, f := range t {
		key, _ := f.Key.(string)
		path, _ := f.Value.(string)
		switch {
		case inlined[key] != "" && path != "":
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			b, err := readSmall(path)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", key, path, err)
			}
			out = append(out, yaml.MapItem{Key: inlined[key], Value: string(b)})
		case !fromFile[key]:
			out = append(out, f)
		}
	}
	return out, nil
}

var (
	yamlKey    = regexp.MustCompile(`^line (\d+): field (.*) not found in type`)
	yamlLine   = regexp.MustCompile(`^(?:yaml: )?line (\d+):`)
	yamlSyntax = regexp.MustCompile(`^yaml: line \d+: [a-z ,]+$`)
	configKey  = regexp.MustCompile(`^[a-z_]{1,32}$`)
)

// yamlError says where the file does not parse, and which key the format
// does not know, but quotes nothing else of it: YAML's messages quote the
// text they did not expect, and --web.config.file /etc/shadow must not
// have root print the hashes.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		if yamlSyntax.MatchString(err.Error()) {
			return err
		}
		return errors.New("not YAML" + lineOf(err.Error()))
	}
	var msgs []string
	for _, e := range te.Errors {
		switch m := yamlKey.FindStringSubmatch(e); {
		case m != nil && configKey.MatchString(m[2]):
			msgs = append(msgs, "unknown key "+m[2]+lineOf(e))
		case m != nil:
			msgs = append(msgs, "a key the format does not have"+lineOf(e))
		default:
			msgs = append(msgs, "a value of the wrong type"+lineOf(e))
		}
	}
	if len(msgs) > 3 {
		msgs = append(msgs[:3], fmt.Sprintf("and %d more", len(msgs)-3))
	}
	return errors.New("not a web configuration: " + strings.Join(msgs, "; "))
}

// lineOf is " at line N" for a YAML message that has its line.
func lineOf(msg string) string {
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return " at line " + m[1]
	}
	return ""
}
