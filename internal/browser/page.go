package browser

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"net/url"
	"path/filepath"
	"time"
)

// Page is what the browser made of one HTML file: the console's
// complaints while loading it and every <figure> as laid out.
type Page struct {
	URL     string
	Title   string
	Console []Message
	Figures []Figure
}

// Figure is one <figure> element of a page, measured as drawn.
type Figure struct {
	ID            string
	Kind          string  // "svg" or "img" (the first of them in the figure), "" if neither
	Width, Height float64 // laid-out size in CSS pixels
	Marks, Texts  int     // SVG shapes (path, line, rect, …) and text elements
	// InkW and InkH are the fractions of the figure's width and height
	// spanned by its coloured marks (a stroke or fill that is not black,
	// white or grey): the data series. Axes, ticks and grid lines are grey;
	// a legend alone is a small box in a corner. For an image: 1 when it
	// decoded, 0 when not.
	InkW, InkH float64
}

// Limits below which a figure counts as empty.
const (
	MinWidth, MinHeight = 100, 50 // CSS px
	MinMarks, MinTexts  = 5, 3    // an SVG plot's axes alone have more
	MinInk              = 1.0 / 3
)

// Empty says why f draws nothing worth the name — no image, zero size, no
// axes, or no data series beyond a legend — or "" if it draws a plot.
func (f Figure) Empty() string {
	switch {
	case f.Kind == "":
		return "no <svg> or <img>"
	case f.Width < MinWidth || f.Height < MinHeight:
		return fmt.Sprintf("drawn %.0f×%.0f px", f.Width, f.Height)
	case f.Kind == "img" && f.InkW == 0:
		return "image does not decode"
	case f.Kind == "svg" && (f.Marks < MinMarks || f.Texts < MinTexts):
		return fmt.Sprintf("%d shapes and %d texts: no axes", f.Marks, f.Texts)
	case f.InkW < MinInk && f.InkH < MinInk:
		return fmt.Sprintf("its data series span %.0f%% of its width and %.0f%% of its height: nothing plotted", 100*f.InkW, 100*f.InkH)
	}
	return ""
}

// figuresJS measures every figure of the page once its fonts are in.
//
//go:embed figures.js
var figuresJS string

// Load opens the HTML file at path, waits for its load event and its
// fonts, and returns the page.
func (b *Browser) Load(ctx context.Context, path string) (*Page, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	u := (&url.URL{Scheme: "file", Path: abs}).String()
	loaded := make(chan struct{})
	b.mu.Lock()
	b.console = nil
	b.loaded = loaded
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var nav struct{ ErrorText string }
	if err := b.call(ctx, "Page.navigate", map[string]any{"url": u}, &nav); err != nil {
		return nil, err
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("%s: %s", u, nav.ErrorText)
	}
	select {
	case <-loaded:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no load event: %w", u, ctx.Err())
	}
	var res struct {
		Result struct {
			Value struct {
				Title   string
				Figures []Figure
			}
		}
		ExceptionDetails *struct{ Text string }
	}
	if err := b.call(ctx, "Runtime.evaluate", map[string]any{"expression": figuresJS, "awaitPromise": true, "returnByValue": true}, &res); err != nil {
		return nil, err
	}
	if res.ExceptionDetails != nil {
		return nil, fmt.Errorf("measuring the figures: %s", res.ExceptionDetails.Text)
	}
	p := &Page{URL: u, Title: res.Result.Value.Title, Figures: res.Result.Value.Figures}
	b.mu.Lock()
	p.Console = b.console
	b.console = nil
	b.mu.Unlock()
	return p, nil
}

// Screenshot is a PNG of the viewport (Options' size) of the page loaded
// last, scrolled to its top.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	if err := b.call(ctx, "Runtime.evaluate", map[string]any{"expression": "window.scrollTo(0, 0)"}, nil); err != nil {
		return nil, err
	}
	var shot struct{ Data string }
	if err := b.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(shot.Data)
}
