#!/usr/bin/env bash
export EXEC='build=$build build_root=$build_root out=$out bash .carry-mini/inner.sh'
scripts/gpu-suite exec
