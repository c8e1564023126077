# Source this (bash): points compilers, CMake, pkg-config and the dynamic loader at the Debian
# packages that scripts/device/gather.sh unpacked into <repo>/.device-deps (or $OMNIRT_DEVICE_DEPS).
# Unpacks .device-deps/deps.tar.xz first when only the archive travelled (the device run).
#   source scripts/device/env.sh            # everything, LD_LIBRARY_PATH included
# Exports OMNIRT_DEVICE_DEPS (the folder) and OMNIRT_DEVICE_LIBS (its library folders).
# shellcheck shell=bash
_omnirt_env_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_omnirt_root=$(cd "$_omnirt_env_dir/../.." && pwd)
export OMNIRT_DEVICE_DEPS=${OMNIRT_DEVICE_DEPS:-$_omnirt_root/.device-deps}
_d=$OMNIRT_DEVICE_DEPS
if [ ! -d "$_d/usr/include" ] && [ -f "$_d/deps.tar.xz" ]; then
  echo "env.sh: unpacking $_d/deps.tar.xz" >&2
  tar -C "$_d" -xJf "$_d/deps.tar.xz" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$_d/deps.tar.xz" "$_d" || echo "env.sh: could not unpack $_d/deps.tar.xz" >&2
fi
if [ ! -d "$_d/usr/include" ]; then
  echo "env.sh: $_d has no usr/include: run scripts/device/gather.sh first" >&2
fi
_omnirt_prepend() {  # _omnirt_prepend VAR value: VAR=value[:old]
  local name=$1 value=$2 old=${!1:-}
  if [ -n "$old" ]; then export "$name=$value:$old"; else export "$name=$value"; fi
}
export OMNIRT_DEVICE_LIBS="$_d/usr/lib/x86_64-linux-gnu:$_d/usr/lib"
_omnirt_prepend CMAKE_PREFIX_PATH "$_d/usr"
_omnirt_prepend CPATH "$_d/usr/include:$_d/usr/include/x86_64-linux-gnu"
_omnirt_prepend LIBRARY_PATH "$OMNIRT_DEVICE_LIBS"
_omnirt_prepend LD_LIBRARY_PATH "$OMNIRT_DEVICE_LIBS"
# fallback/: base libraries (libbsd, libmd, libcom_err, libkeyutils) used only where the image's
# ldconfig does not know the soname.
if [ -d "$_d/fallback" ]; then
  rm -rf "$_d/fallback-active" && mkdir -p "$_d/fallback-active"
  for _f in "$_d"/fallback/lib*.so.*; do
    _soname=$(basename "$_f")
    case $_soname in *.so.[0-9]) ;; *) continue ;; esac  # the soname links only
    if ! /sbin/ldconfig -p 2>/dev/null | grep -q "[[:space:]]$_soname "; then
      ln -sf "../fallback/$_soname" "$_d/fallback-active/$_soname"
      echo "env.sh: $_soname from .device-deps/fallback (the image has none)" >&2
    fi
  done
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$_d/fallback-active"
  export LIBRARY_PATH="$LIBRARY_PATH:$_d/fallback-active"
fi
# Only our .pc files (they are complete; gather.sh made them relocatable with ${pcfiledir}), read
# by our pkgconf through a wrapper that finds its library (CMake's FindPkgConfig uses $PKG_CONFIG).
export PKG_CONFIG_LIBDIR="$_d/usr/lib/x86_64-linux-gnu/pkgconfig:$_d/usr/lib/pkgconfig:$_d/usr/share/pkgconfig"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG="$_omnirt_env_dir/pkg-config"
unset _d _f _soname _omnirt_root _omnirt_env_dir
unset -f _omnirt_prepend
