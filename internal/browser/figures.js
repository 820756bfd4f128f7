// Measures every <figure> of the page as the browser laid it out (see
// Figure in page.go). Evaluated by Load after the load event.
(async () => {
  await document.fonts.ready;
  const shapes = "path, line, polyline, polygon, rect, circle, ellipse";
  // grey: black, white, any grey, or transparent — axes, ticks, grid, background.
  const grey = (c) => {
    const m = /rgba?\((\d+), (\d+), (\d+)(?:, ([\d.]+))?\)/.exec(c);
    return !m || (m[4] !== undefined && +m[4] === 0) || (m[1] === m[2] && m[2] === m[3]);
  };
  const measure = (fig) => {
    const r = { ID: fig.id, Kind: "", Width: 0, Height: 0, Marks: 0, Texts: 0, InkW: 0, InkH: 0 };
    const g = fig.querySelector("svg, img");
    if (!g) return r;
    r.Kind = g.tagName.toLowerCase();
    const box = g.getBoundingClientRect();
    r.Width = box.width;
    r.Height = box.height;
    if (r.Kind === "img") {
      r.InkW = r.InkH = g.complete && g.naturalWidth > 0 ? 1 : 0;
      return r;
    }
    const marks = g.querySelectorAll(shapes);
    r.Marks = marks.length;
    r.Texts = g.querySelectorAll("text").length;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const m of marks) {
      const s = getComputedStyle(m);
      if (grey(s.stroke) && grey(s.fill)) continue;
      const b = m.getBoundingClientRect();
      if (b.width === 0 && b.height === 0) continue;
      x0 = Math.min(x0, b.left); x1 = Math.max(x1, b.right);
      y0 = Math.min(y0, b.top); y1 = Math.max(y1, b.bottom);
    }
    if (x1 >= x0 && box.width > 0 && box.height > 0) {
      r.InkW = (x1 - x0) / box.width;
      r.InkH = (y1 - y0) / box.height;
    }
    return r;
  };
  return { Title: document.title, Figures: [...document.querySelectorAll("figure")].map(measure) };
})()
