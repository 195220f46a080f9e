#!/usr/bin/env bash
# Downloads the benchmark datasets that dcalign's data layer reads (src/data, include/dcalign/
# data.hpp) from their original distributors into a directory, then checks every file against
# the SHA-256 digests pinned below (the same digests as the SHA256SUMS of the project's offline
# copy). The build never runs this script and does not need it; it is for users who do not have
# the offline copy at ../shared/datasets.
#
# Usage: scripts/download_datasets.sh DIR
#   Then point dcalign at DIR: export DCALIGN_DATA=DIR (or LoadOptions::data_dir = DIR).
#   Files already present with the right digest are not downloaded again.
#
# Sources (see ../shared/datasets/README.md for licences and citations):
#   mnist/          Y. LeCun's MNIST page; mirror: the copy torchvision uses (same bytes).
#   fashion-mnist/  Zalando Research's official download location.
#   adult/          UCI Machine Learning Repository (Adult / Census Income).
#   heart-disease/  UCI Heart Disease, processed Cleveland data.
#   pima-diabetes/, german-credit/
#                   jbrownlee/Datasets on GitHub at a pinned commit (the copies the offline
#                   folder was made from; german.csv is UCI german.data with commas).
#   sklearn/        scikit-learn 1.2.1's bundled data files (BSD-3-Clause).
#   molecules/      chemprop (hiv.csv.gz) and DentonJC/virtual_screening (BBBP.csv) at pinned
#                   commits; not read by the loaders, fetched so the folder matches the copy.
#
# Description files (*.names, *.rst) were taken from other copies for the offline folder, so a
# digest mismatch on one of them is reported but does not fail the script; a mismatch on a data
# file does.
set -euo pipefail

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
DIR=$1
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

if command -v curl >/dev/null 2>&1; then
  get() { curl --fail --location --silent --show-error --retry 3 --connect-timeout 30 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  get() { wget --quiet --tries=3 --timeout=30 -O "$2" "$1"; }
else
  echo "download_datasets: need curl or wget" >&2
  exit 1
fi
command -v sha256sum >/dev/null 2>&1 || { echo "download_datasets: need sha256sum" >&2; exit 1; }

# Pinned digests: "sha256  relative/path", as written by sha256sum.
SUMS='5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d  adult/adult.data
c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a  adult/adult.names
a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05  adult/adult.test
346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073  fashion-mnist/t10k-images-idx3-ubyte.gz
67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5  fashion-mnist/t10k-labels-idx1-ubyte.gz
3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84  fashion-mnist/train-images-idx3-ubyte.gz
a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845  fashion-mnist/train-labels-idx1-ubyte.gz
ec12a88b9fc14d74ba646ea0410cf7ff4533bec2eb61652f8ad76796bbfec017  german-credit/german.csv
69b92cb551111bc37098698288849c96f0fd87ce81a2e54451ff39aa1e53fe49  german-credit/german.names
ec7ed5aa4ed8321097808f47b836301c2a0c36f3bb09c40b8b43b622363e6b61  heart-disease/heart-disease.names
a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8  heart-disease/processed.cleveland.data
8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6  mnist/t10k-images-idx3-ubyte.gz
f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6  mnist/t10k-labels-idx1-ubyte.gz
440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609  mnist/train-images-idx3-ubyte.gz
3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c  mnist/train-labels-idx1-ubyte.gz
d07a38487aeac5cee5508413e468043ef3097451d2a112701c2d60be9ec6b662  molecules/BBBP.csv
0a4a7390d6f22035c293e8e0d500655d76233b35f0f68ab128f3ceccdd97a297  molecules/hiv.csv.gz
6bfe5d0f379d17a0e0819b996407e3c09bf80febd4287f2ed212190dfff154af  pima-diabetes/pima-indians-diabetes.csv
60d1939616d51c185add571f935309973eed52eb33a31764aaeeef18745374c5  pima-diabetes/pima-indians-diabetes.names
fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed  sklearn/breast_cancer.csv
f45e8035b24b5c0515c4fd7a18d1d1d65ec1f0d051564c803ef0f6166c5693f7  sklearn/breast_cancer.rst
46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a  sklearn/digits.csv.gz
0169c12ec98069ddd16fcff040019018d8dc1549f06c9cad1cc1350df61d3b82  sklearn/digits.rst
f13ffa8fdd56fd8e6c8d16d4081a3fbd3114bcd0aae4256c43205169cd9d1449  sklearn/iris.csv
45865560d4b0cd10c7ce7dec6eff327497cf654b0fb9ed86997b6b62f05459f7  sklearn/iris.rst
10e8a802908b34f86e5da8ce962f3c806694bc98450a18f61851af59f324bede  sklearn/wine_data.csv
05c7eaa5f6ef99ac9116530d5aee4daadc8d48808a043c2f9ed3dbb53cbe0cca  sklearn/wine_data.rst'

UCI=https://archive.ics.uci.edu/ml/machine-learning-databases
JB=https://raw.githubusercontent.com/jbrownlee/Datasets/d20fcb6402ae34e653d4513b00f39257bb37ed7f
SK=https://raw.githubusercontent.com/scikit-learn/scikit-learn/1.2.1/sklearn/datasets
CHEMPROP=https://raw.githubusercontent.com/chemprop/chemprop/3f2b73372a8968f0f73b2fb279a5780cae918d58
VS=https://raw.githubusercontent.com/DentonJC/virtual_screening/49807c7f30c847585648e324780a2d026a7742c0

# Prints the source URLs of a file, best first.
urls() {
  local f=$1 base=${1##*/}
  case $f in
    mnist/*)
      echo "http://yann.lecun.com/exdb/mnist/$base"
      echo "https://ossci-datasets.s3.amazonaws.com/mnist/$base" ;;
    fashion-mnist/*)
      echo "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/$base" ;;
    adult/*) echo "$UCI/adult/$base" ;;
    heart-disease/*) echo "$UCI/heart-disease/$base" ;;
    pima-diabetes/*|german-credit/*) echo "$JB/$base" ;;
    sklearn/*.rst) echo "$SK/descr/$base" ;;
    sklearn/*) echo "$SK/data/$base" ;;
    molecules/hiv.csv.gz) echo "$CHEMPROP/data/hiv.csv.gz" ;;
    molecules/BBBP.csv) echo "$VS/data/BBBP.csv" ;;
    *) return 1 ;;
  esac
}

digest_ok() {  # digest_ok FILE EXPECTED
  [[ -f $1 ]] && [[ $(sha256sum "$1" | cut -d' ' -f1) == "$2" ]]
}

bad_data=0
while read -r sum rel; do
  dest=$DIR/$rel
  mkdir -p "$(dirname "$dest")"
  if digest_ok "$dest" "$sum"; then
    echo "ok (present)  $rel"
    continue
  fi
  fetched=0
  while read -r url; do
    if get "$url" "$dest.part" </dev/null; then
      mv "$dest.part" "$dest"
      fetched=1
      break
    fi
    echo "  failed: $url" >&2
  done < <(urls "$rel")
  rm -f "$dest.part"
  if [[ $fetched -eq 0 ]]; then
    echo "MISSING       $rel (no source answered)" >&2
    [[ $rel == *.names || $rel == *.rst ]] || bad_data=1
  elif digest_ok "$dest" "$sum"; then
    echo "ok            $rel"
  elif [[ $rel == *.names || $rel == *.rst ]]; then
    echo "DIFFERS       $rel (description file; the loaders do not read it)" >&2
  else
    echo "DIFFERS       $rel (sha256 does not match the pinned digest)" >&2
    bad_data=1
  fi
done <<<"$SUMS"

# The loaders' optional verification (LoadOptions::verify_checksums) reads this file.
printf '%s\n' "$SUMS" >"$DIR/SHA256SUMS"
echo "--- sha256sum -c SHA256SUMS in $DIR"
(cd "$DIR" && sha256sum -c --quiet SHA256SUMS) || true

if [[ $bad_data -ne 0 ]]; then
  echo "download_datasets: some data files are missing or differ from the pinned digests" >&2
  exit 1
fi
echo "download_datasets: done; use DCALIGN_DATA=$DIR"
