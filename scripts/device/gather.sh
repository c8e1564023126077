#!/usr/bin/env bash
# Gathers, on this Debian 12 machine, the Debian packages omnirt needs to build and run on the
# borrowed GPU machine (whose image has CUDA, a CUDA libtorch, CMake and ninja but none of our
# -dev packages, and no network): downloads them with `apt-get download` (nothing is
# installed), unpacks them with `dpkg -x` into <repo>/.device-deps/, trims what a build does
# not read (docs, man pages, locales, static libraries, unused Boost libraries) and rewrites the
# pkg-config files so that they work from wherever the folder lies. See docs/gpu.md.
#
#   bash scripts/device/gather.sh            # core dependencies (what the build needs today)
#   GATHER_MEDIA=1 bash scripts/device/gather.sh   # also FFmpeg and libcurl (see docs/gpu.md)
#
# Environment: GATHER_CACHE (where .deb files are kept between runs; default
# /var/cache/omnirt-device-debs), GATHER_APT_UPDATE=1 (run apt-get update first).
set -uo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel) || exit 1
dest=${GATHER_DEST:-$root/.device-deps}
cache=${GATHER_CACHE:-/var/cache/omnirt-device-debs}
arch=amd64

# What omnirt's build reads (scripts/setup.sh), less the toolchain, libtorch and OpenBLAS
# (the image's torch brings its own BLAS and gloo; libgloo-dev is kept for its headers only,
# see docs/gpu.md), plus pkgconf (CMake's FindPkgConfig needs a pkg-config; the image may have
# none).
core_packages=(
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev
  libboost1.74-dev libpcre2-dev libicu-dev libsndfile1-dev libsoxr-dev
  libucx-dev libgloo-dev
  libjpeg62-turbo-dev libpng-dev libwebp-dev
  libgtest-dev libgmock-dev
  pkgconf pkgconf-bin libpkgconf3
)
media_packages=(
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libswresample-dev
  libcurl4-openssl-dev
)
packages=("${core_packages[@]}")
if [ "${GATHER_MEDIA:-0}" = 1 ]; then packages+=("${media_packages[@]}"); fi

# Never shipped: the C/C++ runtime and toolchain pieces every image with a compiler has
# (shipping Debian's would shadow the image's newer ones), and essential system packages that
# only come in through maintainer scripts or PAM.
skip_regex='^(libc6|libc6-dev|libc-dev-bin|libc-bin|libgcc-s1|libgcc-[0-9]+-dev|gcc-[0-9]+-base|libstdc\+\+6|libstdc\+\+-[0-9]+-dev|libasan[0-9]+|libatomic1|libgomp1|libitm1|liblsan0|libquadmath0|libtsan[0-9]+|libubsan1|libhwasan0|linux-libc-dev|libcrypt1|libcrypt-dev|libnsl2|libnsl-dev|libtirpc3|libtirpc-common|libtirpc-dev|rpcsvc-proto|libpam.*|libselinux1|libsemanage.*|libsepol.*|libaudit.*|libcap-ng0|libdebian-installer4|libnewt0\.52|libslang2|libtextwrap1|libreadline8|libtinfo6|libncursesw6|zlib1g|liblzma5|libbz2-1\.0|libzstd1|libssl3|libsystemd0|libudev1|libgcrypt20|libgpg-error0|liblz4-1|libdb5\.3|libacl1|libattr1|libpcre3|libmd0|libbsd0|libgmp10|libp11-kit0|libtasn1-6|libnettle8|libhogweed6|libunistring2|libidn2-0|libffi8|libgnutls30|libkeyutils1|libcom-err2|libexpat1|libuuid1|libblkid1|libmount1|libsmartcols1|libext2fs2|libss2|libsqlite3-0|libdbus-1-3|libapparmor1|libkmod2|libcap2|libcap2-bin|libelf1|libxxhash0)$'
keep_extra='^(cppzmq-dev|nlohmann-json3-dev|krb5-multidev|pkgconf|pkgconf-bin)$'

step() { printf '\n== %s\n' "$*"; }

if [ "${GATHER_APT_UPDATE:-0}" = 1 ]; then
  step "apt-get update"
  apt-get update -qq || echo "gather: apt-get update failed; using the lists already here"
fi

step "resolving ${#packages[@]} packages and their dependencies"
mapfile -t closure < <(
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${packages[@]}" 2>/dev/null |
    grep -v '^ ' | grep -v '^<' | sort -u)
selected=()
for p in "${closure[@]}"; do
  if [[ $p =~ $keep_extra ]] || { [[ $p =~ ^lib || $p =~ -dev$ ]] && ! [[ $p =~ $skip_regex ]]; }; then
    selected+=("$p")
  fi
done
mapfile -t selected < <(printf '%s\n' "${selected[@]}" | sort -u)
echo "gather: ${#selected[@]} packages: ${selected[*]}"

step "apt-get download into $cache"
mkdir -p "$cache"
declare -A candidate=()
while read -r name version; do candidate[$name]=$version; done < <(
  apt-cache policy "${selected[@]}" 2>/dev/null |
    awk '/^[^ ]/ {p=$1; sub(/:$/, "", p)} /Candidate:/ {print p, $2}')
missing=()
debs=()
for p in "${selected[@]}"; do
  ver=${candidate[$p]:-}
  if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then missing+=("$p"); continue; fi
  pattern="$cache/${p}_${ver//:/%3a}_*.deb"
  if ! compgen -G "$pattern" >/dev/null; then
    (cd "$cache" && { apt-get download -q "$p:$arch" >/dev/null 2>&1 || apt-get download -q "$p" >/dev/null 2>&1; }) ||
      echo "gather: download failed: $p"
  fi
  f=$(compgen -G "$pattern" | head -1)
  if [ -n "$f" ]; then debs+=("$f"); else missing+=("$p"); fi
done
status=0
if [ ${#missing[@]} -gt 0 ]; then echo "gather: MISSING .deb files: ${missing[*]}"; status=1; fi
echo "gather: $(du -ch "${debs[@]}" | tail -1 | cut -f1) of .deb files (${#debs[@]})"

step "unpacking into $dest"
rm -rf "$dest"
mkdir -p "$dest"
for f in "${debs[@]}"; do dpkg -x "$f" "$dest" || { echo "gather: dpkg -x failed: $f"; status=1; }; done
printf '%s\n' "${debs[@]##*/}" >"$dest/PACKAGES"
# Small base libraries that a Debian or Ubuntu image usually has but a slim one may lack: kept
# apart in fallback/, which env.sh puts on the loader path only for the sonames the image's
# ldconfig does not know (ahead of the image's own, an older copy could break its programs).
fallback_packages=(libbsd0 libmd0 libcom-err2 libkeyutils1)
fallback_tmp=$(mktemp -d)
mkdir -p "$dest/fallback"
(cd "$cache" && apt-get download -q "${fallback_packages[@]}" >/dev/null 2>&1) ||
  echo "gather: could not download ${fallback_packages[*]}"
for p in "${fallback_packages[@]}"; do
  f=$(ls -t "$cache/${p}"_*.deb 2>/dev/null | head -1)
  if [ -z "$f" ]; then echo "gather: MISSING fallback $p"; status=1; continue; fi
  dpkg -x "$f" "$fallback_tmp" && echo "${f##*/}" >>"$dest/FALLBACK"
done
find "$fallback_tmp" -name 'lib*.so.*' \( -type f -o -type l \) -exec cp -a {} "$dest/fallback/" \;
rm -rf "$fallback_tmp"
echo "gather: unpacked $(du -sh "$dest" | cut -f1)"

step "trimming"
cd "$dest" || exit 1
rm -rf usr/share/doc usr/share/man usr/share/info usr/share/locale usr/share/lintian \
  usr/share/bug usr/share/bash-completion usr/share/gdb usr/share/aclocal usr/src \
  usr/share/doc-base usr/share/icu usr/lib/icu usr/share/mime etc/ld.so.conf.d
# Executables: only pkgconf is used (icu-devtools and the ucx tools are not).
find usr/bin usr/sbin -mindepth 1 ! -name 'pkgconf' ! -name 'pkg-config' -exec rm -rf {} + 2>/dev/null
# Static libraries: GoogleTest ships only static ones; every other library links shared.
find . -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' -delete
# Boost: only the headers omnirt's sources read, directly or not (the preprocessor's list over
# every file that includes Boost), plus all of boost/{config,asio,beast} (config picks compiler-
# specific files, Asio and Beast platform-specific ones: another compiler may read others).
# Boost's compiled libraries: nothing links them, removed.
if [ -d usr/include/boost ]; then
  sources=$(grep -rlE '#include <boost/' "$root/src" "$root/tests" 2>/dev/null)
  used=$(for s in $sources; do
    g++ -std=c++2b -M -MT x -I"$dest/usr/include" -I"$root/src" "$s" ||
      echo "gather: the preprocessor failed on $s" >&2
  done | tr ' \\' '\n\n' | grep -o "$dest/usr/include/boost/[^ ]*" | xargs -r realpath -ms |
    sed "s|$dest/usr/include/||" | sort -u)
  if [ -z "$used" ] || ! grep -q '^boost/asio' <<<"$used"; then
    echo "gather: could not compute the Boost headers in use; Boost left whole"; status=1
  else
    keep_list=$(mktemp)
    { printf '%s\n' "$used"; find usr/include/boost/config usr/include/boost/asio \
        usr/include/boost/beast usr/include/boost/beast.hpp usr/include/boost/asio.hpp \
        -type f 2>/dev/null | sed 's|^usr/include/||'; } | sort -u >"$keep_list"
    echo "gather: keeping $(wc -l <"$keep_list") Boost headers of $(find usr/include/boost -type f | wc -l)"
    find usr/include/boost -type f | sed 's|^usr/include/||' | sort |
      comm -23 - "$keep_list" | sed 's|^|usr/include/|' | xargs -r rm -f
    rm -f "$keep_list"
  fi
  rm -rf usr/lib/x86_64-linux-gnu/cmake/boost_* usr/lib/x86_64-linux-gnu/cmake/Boost-*
  rm -f usr/lib/x86_64-linux-gnu/libboost_*
fi
# gloo's headers apart: run.sh adds them to the include path only when the torch wheel has
# none (in front of the wheel's own they would shadow the gloo it was built with).
if [ -d usr/include/gloo ]; then mkdir -p gloo/include && mv usr/include/gloo gloo/include/; fi
# /lib (packages not yet merged into /usr) joins usr/lib; links to absolute /usr/... or /lib/...
# paths point into this folder instead (relative); then dangling links (those of trimmed files)
# and empty folders go.
if [ -d lib ]; then cp -a lib/. usr/lib/ && rm -rf lib; fi
find . -type l -lname '/*' | while read -r link; do
  target=$(readlink "$link")
  for inside in ".$target" "./usr$target"; do
    if [ -e "$inside" ]; then
      ln -sfn "$(realpath -ms --relative-to="$(dirname "$link")" "$inside")" "$link"
      break
    fi
  done
done
find . -xtype l -delete
find . -depth -type d -empty -delete

step "pkg-config files: /usr -> \${pcfiledir}-relative"
python3 - "$dest" <<'PY' || status=1
import os, re, sys
dest = sys.argv[1]
pattern = re.compile(r'(^|[=\s:"\']|-I|-L|-isystem)/usr(?=[/\s"\']|$)', re.M)
count = 0
for top in ("usr/lib/x86_64-linux-gnu/pkgconfig", "usr/lib/pkgconfig", "usr/share/pkgconfig"):
    folder = os.path.join(dest, top)
    if not os.path.isdir(folder):
        continue
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if not name.endswith(".pc"):
            continue
        rel = os.path.relpath(dest, folder)
        text = open(path).read()
        if os.path.islink(path):
            # ${pcfiledir} is the folder the file was found in: a linked .pc becomes a copy.
            os.remove(path)
            open(path, "w").write(text)
        new = pattern.sub(lambda m: m.group(1) + "${pcfiledir}/" + rel + "/usr", text)
        if new != text:
            open(path, "w").write(new)
            count += 1
print(f"gather: rewrote {count} .pc files")
PY

step "absolute /usr paths left in CMake package files (informational)"
grep -rlE '"/usr/(include|lib)' usr/lib/x86_64-linux-gnu/cmake usr/share/cmake* usr/lib/cmake 2>/dev/null | sed 's/^/  /' || true

# What travels to the device: one xz archive of the folder (ICU's data library alone is 30 MB
# unpacked). scripts/device/run.sh unpacks it there when the folder itself did not travel.
step "packing $dest/deps.tar.xz"
rm -f "$dest/deps.tar.xz" "$dest"/deps.tar.xz.*
pack=$(mktemp /tmp/omnirt-device-deps.XXXXXX)
if tar -C "$dest" -cf - . | xz -9 -T2 >"$pack"; then
  mv "$pack" "$dest/deps.tar.xz" && chmod 644 "$dest/deps.tar.xz"
else
  echo "gather: packing failed"; rm -f "$pack"; status=1
fi

step "size"
echo "gather: unpacked $(du -sh --exclude=deps.tar.xz "$dest" | cut -f1), packed $(du -h "$dest/deps.tar.xz" | cut -f1)"
echo "gather: what travels besides: $(cd "$root" && git ls-files -z --cached --others --exclude-standard | du -ch --files0-from=- 2>/dev/null | tail -1 | cut -f1) (tracked and untracked-not-ignored files)"
echo "gather: done (status $status)"
exit $status
