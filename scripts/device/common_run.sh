# run NAME TIMEOUT cmd...: under the call's remaining budget (BUDGET s from T0); once per warm machine (/tmp/done).
left() { echo $(( ${BUDGET:-580} - ($(date +%s) - T0) )); }
run() { local name=$1 tmo=$2; shift 2; local l; l=$(left)
  [ -f /tmp/done/$name ] && { echo "done before: $name"; return; }
  [ "$l" -lt 25 ] && { echo "SKIP $name (no time)"; return; }
  [ "$tmo" -gt "$l" ] && tmo=$l; say "$name (timeout $tmo)"; timeout $tmo "$@" > $R/$name.txt 2>&1; local rc=$?
  echo "exit $rc" >> $R/$name.txt; [ $rc = 0 ] && { mkdir -p /tmp/done; touch /tmp/done/$name; }; }
