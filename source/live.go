package source

// Live is a source that shows a window while the recording runs (a live
// view, a metrics exporter): the values, by name, of its newest window
// that ends before Timeline.ReadTo, whose messages have been read, e.g.
// "switches_per_msg" or "broker_util". Names are the source's own
// columns where it has them; values it cannot know are NaN.
// Called on the recording's sampling goroutine, between Sample calls.
type Live interface {
	Source
	LiveValues() map[string]float64
}
