# Diagnosis at the SASS line: ours beside QuACK 0.2.0 under ncu (one launch each, clocks left
# alone), the kernel-wide figures, then the SASS lines with the most stall samples and their
# reasons; each kernel's whole source page comes back as $R/<name>/sass_<n>.csv.xz.
ncu_sass() { mkdir -p $R/$1; ncu --clock-control none --profile-from-start off --set full --import-source no -f -o /tmp/ncu_$1 python3 scripts/ncu_gemm_quack.py "${@:2}" > /dev/null 2>&1; python3 scripts/ncu_gemm_quack.py --report /tmp/ncu_$1.ncu-rep; python3 scripts/ncu_gemm_quack.py --sass /tmp/ncu_$1.ncu-rep $R/$1; }
run sass_g8192 150 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass g8192 8192 8192 8192"
run sass_ce65536 150 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass ce65536 ce 16384 65536"
run sass_g2048 150 bash -c "$(declare -f ncu_sass); R=$R; ncu_sass g2048 16384 2048 5632"
