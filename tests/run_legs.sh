#!/usr/bin/env bash
# `make test`'s legs: the tests that touch ROS (`-m ros`) on Kilted, then on Jazzy, one test
# at a time; the others (physics, fitting, training, files) on two workers at the lowest
# priority, meant to run beside them (withdrawn for now: see the wait below).
#
# The ROS tests time real nodes over DDS and mostly wait on the clock, leaving a core idle;
# the others fill that idle time. They run in a session of their own whose autogroup is
# niced to 19 (tasks in other sessions, such as the nodes the ROS tests start, are weighed
# against a session as a whole, so the tasks' own nice alone would not yield to them), and
# every task at nice 19: a ROS test takes a core whenever it wants one. Their log is
# printed when they end. The exit status is the first failing leg's (pytest's exit 5, "no
# tests selected", counts as a pass: a PYTEST_ARGS selection may leave a leg empty).
#
# The Jazzy leg runs the ROS tests not marked slow, in the Jazzy venv against install-jazzy/.
#
# Usage: tests/run_legs.sh KILTED_VENV_BIN JAZZY_VENV_BIN [PYTEST_ARG...]  (all three legs)
#        tests/run_legs.sh --jazzy JAZZY_VENV_BIN [PYTEST_ARG...]         (the Jazzy leg)
set -uo pipefail
cd "$(dirname "$0")/.."

passed() { [ "$1" -eq 0 ] || [ "$1" -eq 5 ]; }

jazzy_leg() {  # JAZZY_VENV_BIN [PYTEST_ARG...]
    local jbin=$1
    shift
    AMENT_PREFIX_PATH=$(ls -d "$PWD"/install-jazzy/simops_* | paste -sd:) \
        "$jbin/python" -m pytest -m "ros and not slow" --durations=15 "$@"
}

if [ "$1" = --jazzy ]; then
    shift
    jazzy_leg "$@"
    status=$?
    passed "$status" || exit "$status"
    exit 0
fi

bin=$1
jbin=$2
shift 2
mkdir -p log
others_log=log/test-not-ros.log
echo "the tests that do not touch ROS run beside the ROS tests, at the lowest priority;" \
    "their log ($others_log) is printed when they end"
setsid bash -c 'echo 19 2>/dev/null > /proc/self/autogroup ||
        echo "(this kernel keeps the session autogroup at its priority: nice 19 only)"
    exec nice -n 19 "$@"' run_legs "$bin/python" -m pytest -m "not ros" -n 2 \
    --dist worksteal --durations=15 "$@" > "$others_log" 2>&1 &
others=$!
# A background job of a shell without job control is not a process group leader, so setsid
# made it a session's leader in place: its pid names that session.
trap 'pkill -TERM -s "$others" 2>/dev/null' EXIT
trap 'exit 143' TERM
# A Ctrl-C reaches pytest, which ends with exit 2 ("interrupted"), and this shell, which lets
# it be since its command handled it: pytest's exit 2 ends the legs here.
# Overlapping the legs failed 5 Jazzy discovery waits in one CI run (2026-12-03): until
# their cause is found, the ROS legs start once the other tests have ended.
wait "$others"
others_status=$?
cat "$others_log"
"$bin/python" -m pytest -m ros --durations=30 "$@"
kilted=$?
[ "$kilted" -ne 2 ] || exit 2
jazzy_leg "$jbin" "$@"
jazzy=$?
[ "$jazzy" -ne 2 ] || exit 2
trap - EXIT
for status in "$others_status" "$kilted" "$jazzy"; do
    passed "$status" || exit "$status"
done
