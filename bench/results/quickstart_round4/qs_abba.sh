cd /work/main
for tag in before1 after1 after2 before2; do
  case $tag in before*) pp=/tmp/before42b/src;; *) pp=/work/main/src;; esac
  rm -rf /tmp/b42/qs_$tag
  s=$(date +%s.%N)
  PYTHONPATH=$pp .venv/bin/python -m grposcope.cli train --preset quickstart --output_dir /tmp/b42/qs_$tag > /tmp/b42/qs_$tag.log 2>&1
  e=$(date +%s.%N)
  echo "$tag $(python3 -c "print(round($e-$s,1))")" >> /tmp/b42/qs_abba.txt
done
echo done >> /tmp/b42/qs_abba.txt
