# Sourced by the bench scripts: start_cluster and stop_cluster for one controller, one or more workers and
# one gateway on loopback. The caller sets: bench_name (message prefix), package, port, controller_port,
# worker_port, threads, logs; it calls `trap stop_cluster EXIT`. Optional: cluster_workers (default 1; the
# workers listen on worker_port, worker_port + 1, ...), controller_flags (an array), bin_dir (the build
# folder holding the binaries, default build) and kv_cache_bytes (each worker's, default 1 GiB).
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
  local count=${cluster_workers:-1}
  "${bin_dir:-build}/controller/llmc-controller" --listen_address="127.0.0.1:$controller_port" \
    --metrics_address="127.0.0.1:$((controller_port + 80))" ${controller_flags[@]+"${controller_flags[@]}"} \
    >"$logs/$name-controller.log" 2>&1 &
  pids+=($!)
  local w id
  for w in $(seq 0 $((count - 1))); do
    id=bench-worker
    [ "$count" = 1 ] || id="bench-worker-$w"
    "${bin_dir:-build}/worker/llmc-worker" --model_path="$package" --listen_address="127.0.0.1:$((worker_port + w))" \
      --metrics_address="127.0.0.1:$((worker_port + 80 + w))" --controller_address="127.0.0.1:$controller_port" \
      --worker_id="$id" --num_threads="$threads" --kv_cache_bytes="${kv_cache_bytes:-$((1 << 30))}" "$@" \
      >"$logs/$name-$id.log" 2>&1 &
    pids+=($!)
  done
  "${bin_dir:-build}/gateway/llmc-gateway" --listen_address="127.0.0.1:$port" \
    --controller_address="127.0.0.1:$controller_port" >"$logs/$name-gateway.log" 2>&1 &
  pids+=($!)
  local warm
  for _ in $(seq 1 600); do
    # Every worker warmed up (each registers once it has), and the gateway lists the model.
    warm=$(cat "$logs/$name"-bench-worker*.log 2>/dev/null | grep -c "engine warmed up" || true)
    if [ "$warm" -ge "$count" ] && curl -fsS "http://127.0.0.1:$port/v1/models" 2>/dev/null | grep -q '"id"'; then
      [ "$count" = 1 ] || sleep 1  # a heartbeat or two, so the tables hold every worker
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
