# A small job runner for .ci/run, sourced by it: steps run as background
# jobs, each with its output kept in a file and printed whole when the job
# ends, under a header that says how it ended and how long it took.
#
#   job NAME CMD [ARG...]   runs CMD (a command or a shell function) as job
#                           NAME, under set -euo pipefail
#   after NAME...           inside a job: waits for the jobs named to end,
#                           and fails if one of them failed
#   await NAME...           inside a job: waits for the jobs named to end,
#                           however they ended
#   finish                  waits for every job, printing each as it ends,
#                           then a table of the jobs' times; returns 1 if
#                           any job failed
#
# Jobs start at once; a job that needs another's result (a package
# installed, a file built) says so with after, first thing.

jobs_dir="$(mktemp -d)"
jobs_t0=$(date +%s)
declare -A jobs_pid=() jobs_start=()
jobs_order=()

job() {
	local name=$1
	shift
	jobs_start[$name]=$(($(date +%s) - jobs_t0))
	jobs_order+=("$name")
	(
		set +e
		(
			set -euo pipefail
			"$@"
		) >"$jobs_dir/$name.log" 2>&1
		rc=$?
		echo "$rc" >"$jobs_dir/$name.rc.tmp"
		mv "$jobs_dir/$name.rc.tmp" "$jobs_dir/$name.rc"
		exit "$rc"
	) &
	jobs_pid[$name]=$!
	printf '[%4ds] -- %s started\n' "${jobs_start[$name]}" "$name"
}

after() {
	local dep
	for dep; do
		until [ -e "$jobs_dir/$dep.rc" ]; do sleep 1; done
		if [ "$(cat "$jobs_dir/$dep.rc")" != 0 ]; then
			echo "not run: job $dep failed"
			return 1
		fi
	done
}

await() {
	local dep
	for dep; do
		until [ -e "$jobs_dir/$dep.rc" ]; do sleep 1; done
	done
}

finish() {
	local -A name_of=() took=()
	local name pid rc now failed=()
	for name in "${!jobs_pid[@]}"; do name_of[${jobs_pid[$name]}]=$name; done
	while [ ${#name_of[@]} -gt 0 ]; do
		pid=""
		if wait -n -p pid "${!name_of[@]}"; then rc=0; else rc=$?; fi
		[ -n "$pid" ] || break
		name=${name_of[$pid]}
		unset "name_of[$pid]"
		now=$(($(date +%s) - jobs_t0))
		took[$name]=$((now - ${jobs_start[$name]}))
		if [ "$rc" = 0 ]; then
			printf '\n[%4ds] == %s: ok in %d s\n' "$now" "$name" "${took[$name]}"
		else
			printf '\n[%4ds] == %s: FAILED (exit %d) in %d s\n' "$now" "$name" "$rc" "${took[$name]}"
			failed+=("$name")
		fi
		cat "$jobs_dir/$name.log"
	done
	# A job's time counts its wait for the jobs it needs: the end is what
	# tells where the minutes went.
	printf '\n== jobs (seconds from the start: started, ended): %d s in all\n' "$(($(date +%s) - jobs_t0))"
	for name in "${jobs_order[@]}"; do
		rc=$(cat "$jobs_dir/$name.rc" 2>/dev/null || echo '?')
		printf '  %-14s %4d %4s  %s\n' "$name" "${jobs_start[$name]}" "$((${jobs_start[$name]} + ${took[$name]:-0}))" "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
	done
	rm -rf "$jobs_dir"
	if [ ${#failed[@]} -gt 0 ]; then
		echo "failed: ${failed[*]}" >&2
		return 1
	fi
}
