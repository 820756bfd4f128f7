package recfile

// PlatformFile holds the platform constants `brokertrace platform`
// measured (Ginpex's goal-oriented experiments); `calibrate` reads it.
const PlatformFile = "platform.json"

// Platform is platform.json.
type Platform struct {
	Tool       string             `json:"tool"`
	Version    string             `json:"version"`
	Host       Host               `json:"host"`
	CPUModel   string             `json:"cpu_model"`
	StartWall  string             `json:"start_wall"`
	EndWall    string             `json:"end_wall"`
	Quick      bool               `json:"quick"`
	Properties []PlatformProperty `json:"properties"`
	Warnings   []string           `json:"warnings"`
}

// Names of the properties calibrate reads.
const (
	PlatformContextSwitch = "context_switch_ns" // one switch between two threads on one CPU
	PlatformTimeslice     = "timeslice_ns"      // the quantum a CPU-bound thread gets under contention
)

// PlatformProperty is one detected property with its spread and method.
type PlatformProperty struct {
	Name    string  `json:"name"`
	Variant string  `json:"variant,omitempty"` // e.g. same-cpu/pipe
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	N       int     `json:"n"`
	// CI95Low and CI95High bound the mean (Student's t).
	CI95Low  *float64 `json:"ci95_low,omitempty"`
	CI95High *float64 `json:"ci95_high,omitempty"`
	Q1       float64  `json:"q1"`
	Median   float64  `json:"median"`
	Q3       float64  `json:"q3"`
	Method   string   `json:"method"`
	// Experiment is the experiment's name; SamplesFile its raw samples,
	// relative to platform.json.
	Experiment  string `json:"experiment"`
	SamplesFile string `json:"samples_file,omitempty"`
}

// Property returns the first property named name (any variant when
// variant is ""), and whether there is one.
func (p *Platform) Property(name, variant string) (PlatformProperty, bool) {
	for _, q := range p.Properties {
		if q.Name == name && (variant == "" || q.Variant == variant) {
			return q, true
		}
	}
	return PlatformProperty{}, false
}
