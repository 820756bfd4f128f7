package recfile

import (
	"math"
	"reflect"
)

// Values returns row's numeric columns by their CSV names, for views that
// show a source's latest window while it runs (source.Live): the keys are
// exactly the file's column names. A nil pointer field, like an empty CSV
// field, is NaN; string columns are left out.
func Values[T any](row *T) map[string]float64 {
	v := reflect.ValueOf(row).Elem()
	cols := layout(v.Type())
	out := make(map[string]float64, len(cols))
	for _, c := range cols {
		f := v.Field(c.index)
		if c.ptr {
			if f.IsNil() {
				out[c.name] = math.NaN()
				continue
			}
			f = f.Elem()
		}
		switch c.kind {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[c.name] = float64(f.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[c.name] = float64(f.Uint())
		case reflect.Float32, reflect.Float64:
			out[c.name] = f.Float()
		}
	}
	return out
}
