// Package predict runs the calibrated broker model (model/sim) at the
// sweep's rates and sets the predictions beside the measurements:
// calibration.json (and the sweep's step directories, for the measured
// latency distributions) in, prediction.json out, with the error per rate
// and the goals checked (broker utilisation within 5 percentage
// points below saturation, saturation throughput within 10%, median
// latency within 2×).
package predict
