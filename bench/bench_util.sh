# Shell helpers the bench scripts source, run from the repository root.

# The host in one line: its CPU model and core count.
bench_machine() {
  echo "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
}

# bench_tokens CONFIG FILE COUNT: COUNT uint16 tokens of CONFIG's vocabulary
# into FILE, sampled as bench/train_vs_pytorch.py samples them (seed 1234).
bench_tokens() {
  local vocab
  vocab=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' \
    "$1")
  /usr/bin/python3 bench/train_vs_pytorch.py data "$2" --tokens "$3" --seed 1234 \
    --vocab "$vocab" >/dev/null
}
