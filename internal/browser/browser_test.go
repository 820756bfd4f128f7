package browser

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokertrace/brokertrace/internal/testutil"
)

// browserPlot is an SVG plot written by hand, so what it draws is known:
// grey axes and ticks, a coloured legend thumbnail in the top right corner
// (20×8 of 400×200), and data (a coloured line across the plot) unless
// noData.
func browserPlot(data string) string {
	return `<svg width="400" height="200" viewBox="0 0 400 200">
<path d="M40,10L40,180L390,180" style="fill:none;stroke:#000000" />
<path d="M40,180L40,185" style="stroke:#000000" /><path d="M140,180L140,185" style="stroke:#000000" /><path d="M240,180L240,185" style="stroke:#000000" />
<path d="M40,100L390,100" style="fill:none;stroke:#DDDDDD" />
<text x="30" y="195">0</text><text x="130" y="195">1</text><text x="230" y="195">2</text><text x="5" y="100">y</text>
` + data + `
<path d="M360,15L380,15" style="fill:none;stroke:#1F77B4" /><text x="300" y="18">series</text>
</svg>`
}

const browserData = `<path d="M40,170L100,120L200,150L300,40L390,90" style="fill:none;stroke:#1F77B4" />`

// TestPages: pages with known faults, each reported as such, and a sound
// page with none.
func TestPages(t *testing.T) {
	testutil.RequireTools(t, Program)
	b, err := Start(t.Context(), Options{Width: 800, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fig := func(id, body string) string { return `<figure id="` + id + `">` + body + `</figure>` }
	for _, c := range []struct {
		name, body string
		console    []string // Source+" "+Level of each message, in order
		empty      map[string]string
	}{
		{"sound", fig("a", browserPlot(browserData)), nil, nil},
		{"console.error and warn", `<script>console.error("bad", 42); console.warn("odd")</script>` + fig("a", browserPlot(browserData)),
			[]string{"console error: bad 42", "console warning: odd"}, nil},
		{"exception", `<script>null.x</script>`, []string{"exception error: Uncaught TypeError"}, nil},
		{"unparsable path", fig("a", browserPlot(`<path d="M40,NaN" style="stroke:#1F77B4" />`+browserData)),
			[]string{"rendering error: Error: <path> attribute d"}, nil},
		{"missing image", fig("a", `<img src="no-such.png" width="300" height="100">`),
			[]string{"network error: Failed to load resource"}, map[string]string{"a": "image does not decode"}},
		{"legend only", fig("a", browserPlot("")), nil, map[string]string{"a": "nothing plotted"}},
		{"no svg", fig("a", "<p>no plot</p>"), nil, map[string]string{"a": "no <svg> or <img>"}},
		{"hidden", `<style>#b svg { display: none }</style>` + fig("a", browserPlot(browserData)) + fig("b", browserPlot(browserData)),
			nil, map[string]string{"b": "drawn 0×0 px"}},
		{"no axes", fig("a", `<svg width="400" height="200">`+browserData+`</svg>`), nil, map[string]string{"a": "no axes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "page.html")
			if err := os.WriteFile(path, []byte("<!DOCTYPE html><html><head><title>t</title></head><body>"+c.body+"</body></html>"), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := b.Load(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Console) != len(c.console) {
				t.Errorf("console %q, want %q", p.Console, c.console)
			}
			for i, m := range p.Console {
				if i < len(c.console) && !strings.HasPrefix(m.String(), c.console[i]) {
					t.Errorf("console[%d] %q, want %q…", i, m, c.console[i])
				}
			}
			for _, f := range p.Figures {
				if got, want := f.Empty(), c.empty[f.ID]; !strings.Contains(got, want) || (want == "") != (got == "") {
					t.Errorf("figure %s %+v: empty %q, want %q", f.ID, f, got, want)
				}
			}
		})
	}
}
