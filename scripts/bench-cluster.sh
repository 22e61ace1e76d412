# Sourced by the bench scripts: start_cluster and stop_cluster for one controller, one worker and one
# gateway on loopback. The caller sets: bench_name (message prefix), package, port, controller_port,
# worker_port, threads, logs; it calls `trap stop_cluster EXIT`.
pids=()

stop_cluster() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 100); do  # up to 10 s for a clean exit, then force
      alive=0
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  pids=()
}

# start_cluster NAME [worker flags...]: the three processes, logs under $logs; waits until the gateway
# lists the model (bounded).
start_cluster() {
  local name=$1
  shift
  build/controller/llmc-controller --listen_address="127.0.0.1:$controller_port" \
    --metrics_address="127.0.0.1:$((controller_port + 80))" >"$logs/$name-controller.log" 2>&1 &
  pids+=($!)
  build/worker/llmc-worker --model_path="$package" --listen_address="127.0.0.1:$worker_port" \
    --metrics_address="127.0.0.1:$((worker_port + 80))" --controller_address="127.0.0.1:$controller_port" \
    --worker_id="bench-worker" --num_threads="$threads" --kv_cache_bytes=$((1 << 30)) "$@" \
    >"$logs/$name-worker.log" 2>&1 &
  pids+=($!)
  build/gateway/llmc-gateway --listen_address="127.0.0.1:$port" \
    --controller_address="127.0.0.1:$controller_port" >"$logs/$name-gateway.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    if curl -fsS "http://127.0.0.1:$port/v1/models" 2>/dev/null | grep -q '"id"'; then
      return 0
    fi
    for pid in "${pids[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "$bench_name: a cluster process exited; see $logs/$name-*.log" >&2
        return 1
      fi
    done
    sleep 0.5
  done
  echo "$bench_name: the cluster did not serve the model within 300 s; see $logs/$name-*.log" >&2
  return 1
}
