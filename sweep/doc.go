// Package sweep measures a broker at a ladder of message rates, the
// experiment of ICPE'14 §3 (Figs. 2, 4, 5, 10): per step a recording
// (`brokertrace record`) and an open-loop load (`brokertrace load`) in one
// directory, the step's figures summarised over a window that leaves out
// the load's warm-up and its shutdown, and the climb stopped once the
// broker falls behind the asked rate.
//
// Every step runs as child processes of the same binary, so a step
// directory is exactly what a user gets from record and load by hand, and
// `brokertrace report STEPDIR` reads it. In run mode the broker is started
// once, in a cgroup of its own, and lives through every step: like the
// paper's long-running broker, and a JVM broker's JIT warms up once, not
// once per step. sweep.json (recfile.Sweep) is rewritten after every step,
// so an interrupted sweep resumes where it stopped.
package sweep
