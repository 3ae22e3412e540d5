#!/usr/bin/env bash
# Builds what `make e2e` runs from pinned, published Go modules into a cache outside the repo, so fresh
# clones and CI on the same machine reuse it (docs/e2e.md; the contract is issue 27's):
#   $E2E_CACHE/bin/          kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl (k8s.io/kubernetes),
#                            registration placement addon work (open-cluster-management.io/ocm),
#                            ocm-addon-webhook (OCM's addon conversion webhooks on 127.0.0.1, our main),
#                            kueue (sigs.k8s.io/kueue), helm (helm.sh/helm/v3),
#                            e2e-device-plugin e2e-dra-plugin pause (ours: e2e/go/plugins), VERSIONS
#   $E2E_CACHE/crds/         ocm-hub ocm-klusterlet kueue: CRD YAML copied from the module cache
#   $E2E_CACHE/images/       pause.oci.tar (registry.k8s.io/pause:3.10.2, our static pause)
# E2E_CACHE is $ACCELSCORE_E2E_CACHE, default ~/.cache/accelscore-e2e. Go's own build and module caches are
# the defaults, and a binary whose inputs are unchanged (build_group's key, in $E2E_CACHE/keys) is not rebuilt, so a
# rerun only checks; the others of one module directory are built by one `go build`. One line per artifact: name,
# built or cached, seconds.
#
# Usage: e2e/build.sh [ARTIFACT...]      (default: all; names as in the table below, or crds, image, packages)
# Environment: ACCELSCORE_E2E_CACHE, E2E_GO_PARALLEL (go build -p, default 2), E2E_SKIP_PACKAGES=1 (do not
# install the Debian packages the rig runs).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
E2E_CACHE=${ACCELSCORE_E2E_CACHE:-$HOME/.cache/accelscore-e2e}
BIN=$E2E_CACHE/bin
GO_PARALLEL=${E2E_GO_PARALLEL:-2}
export CGO_ENABLED=0   # static binaries: no C toolchain needed, and the pause image needs no libc

die() { echo "e2e/build: $*" >&2; exit 1; }
command -v go >/dev/null || die "go is not on PATH (Go >= 1.26: https://go.dev/dl/)"

# name | Go module dir under e2e/go | package | module whose version it is ("-": ours). Built in this order: what
# the rig's node and apiservers need first.
ARTIFACTS="
kube-apiserver          kube     k8s.io/kubernetes/cmd/kube-apiserver              k8s.io/kubernetes
kubelet                 kube     k8s.io/kubernetes/cmd/kubelet                     k8s.io/kubernetes
kube-scheduler          kube     k8s.io/kubernetes/cmd/kube-scheduler              k8s.io/kubernetes
kube-controller-manager kube     k8s.io/kubernetes/cmd/kube-controller-manager     k8s.io/kubernetes
kubectl                 kube     k8s.io/kubernetes/cmd/kubectl                     k8s.io/kubernetes
e2e-device-plugin       plugins  ./cmd/e2e-device-plugin                           -
e2e-dra-plugin          plugins  ./cmd/e2e-dra-plugin                              -
pause                   plugins  ./cmd/pause                                       -
registration            ocm      open-cluster-management.io/ocm/cmd/registration   open-cluster-management.io/ocm
placement               ocm      open-cluster-management.io/ocm/cmd/placement      open-cluster-management.io/ocm
addon                   ocm      open-cluster-management.io/ocm/cmd/addon          open-cluster-management.io/ocm
work                    ocm      open-cluster-management.io/ocm/cmd/work           open-cluster-management.io/ocm
ocm-addon-webhook       ocm      ./cmd/ocm-addon-webhook                           -
kueue                   kueue    sigs.k8s.io/kueue/cmd/kueue                       sigs.k8s.io/kueue
helm                    tools    helm.sh/helm/v3/cmd/helm                          helm.sh/helm/v3
"
PAUSE_REF=registry.k8s.io/pause:3.10.2

wanted() {  # is $1 selected on the command line (or is nothing selected)?
  [ ${#SELECTED[@]} -eq 0 ] && return 0
  local s
  for s in "${SELECTED[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

moddir() { (cd "$HERE/go/$1" && go list -m -f '{{.Dir}}' "$2"); }
modversion() { (cd "$HERE/go/$1" && go list -m -f '{{.Version}}' "$2"); }

# origin MODDIR MODULE: "<time> <commit>" of the module version, from the proxy's .info in the module cache.
origin() {
  local info
  info="$(go env GOMODCACHE)/cache/download/$2/@v/$(modversion "$1" "$2").info"
  python3 - "$info" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["Time"], d.get("Origin", {}).get("Hash", "unknown"))
EOF
}

# ldflags MODDIR MODULE: the version stamps each project's own release build sets (their Makefiles).
ldflags() {
  local dir=$1 mod=$2 ver when commit flags="-s -w" kv
  [ "$mod" = - ] && { echo "$flags"; return; }
  ver=$(modversion "$dir" "$mod")
  read -r when commit < <(origin "$dir" "$mod")
  case "$mod" in
    k8s.io/kubernetes)  # hack/lib/version.sh
      local major=${ver#v} minor
      minor=${major#*.} minor=${minor%%.*} major=${major%%.*}
      for kv in "gitVersion=$ver" "gitMajor=$major" "gitMinor=$minor" "gitCommit=$commit" gitTreeState=clean \
        "buildDate=$when"; do
        flags+=" -X 'k8s.io/client-go/pkg/version.$kv' -X 'k8s.io/component-base/version.$kv'"
      done ;;
    open-cluster-management.io/ocm)
      flags+=" -X open-cluster-management.io/ocm/pkg/version.versionFromGit=$ver"
      flags+=" -X open-cluster-management.io/ocm/pkg/version.commitFromGit=$commit"
      flags+=" -X open-cluster-management.io/ocm/pkg/version.buildDate=$when" ;;
    sigs.k8s.io/kueue)
      flags+=" -X sigs.k8s.io/kueue/pkg/version.GitVersion=$ver -X sigs.k8s.io/kueue/pkg/version.GitCommit=$commit"
      flags+=" -X sigs.k8s.io/kueue/pkg/version.BuildDate=$when" ;;
    helm.sh/helm/v3)  # helm's Makefile: its version, and the Kubernetes version its client modules are
      local kmaj kmin
      kmin=$(modversion "$dir" k8s.io/client-go) kmin=${kmin#v0.} kmin=${kmin%%.*} kmaj=1
      flags+=" -X helm.sh/helm/v3/internal/version.version=$ver -X helm.sh/helm/v3/internal/version.gitCommit=$commit"
      for kv in pkg/lint/rules pkg/chartutil; do
        flags+=" -X helm.sh/helm/v3/$kv.k8sVersionMajor=$kmaj -X helm.sh/helm/v3/$kv.k8sVersionMinor=$kmin"
      done ;;
  esac
  echo "$flags"
}

mtime() { stat -c %Y "$1" 2>/dev/null || echo 0; }
report() { printf '%-24s %-7s %5s s\n' "$1" "$2" "$3"; }

# gokey MODDIR PACKAGE FLAGS: what a binary is built from: the toolchain and its settings, the package, the link
# flags (the module versions) and every file of its module directory under e2e/go (go.mod and go.sum pin the
# modules; our own programs' sources are there too).
gokey() {
  { go env GOVERSION GOOS GOARCH GOFLAGS CGO_ENABLED; printf '%s\n' "$2" "$3"
    (cd "$HERE/go/$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -d' ' -f1
}

# build_group MODDIR MODULE "NAME PACKAGE"...: the binaries of one module directory that share their link flags
# (MODULE's version stamps), in one `go build -o $BIN/ PACKAGE...`: go loads the package graph once and links each
# binary while it still compiles for the others. `go build -o` relinks every time (5-15 s a binary on a loaded
# machine), so a binary whose key (gokey) equals the one recorded at its build is not handed to go at all; only
# the others are built. Each built binary's line gives the seconds of the one go build.
build_group() {
  local dir=$1 mod=$2 start flags entry name pkg key i
  local -a stale=() pkgs=() keys=()
  shift 2
  start=$(date +%s)
  flags=$(ldflags "$dir" "$mod")
  for entry in "$@"; do
    read -r name pkg <<< "$entry"
    # go build -o DIR/ names each binary after its package's last element
    [ "${pkg##*/}" = "$name" ] || die "artifact $name: its package $pkg would be written as ${pkg##*/}"
    key=$(gokey "$dir" "$pkg" "$flags")
    if [ -x "$BIN/$name" ] && [ "$(cat "$E2E_CACHE/keys/$name" 2>/dev/null)" = "$key" ]; then
      report "$name" cached $(( $(date +%s) - start ))
    else
      rm -f "$E2E_CACHE/keys/$name"
      stale+=("$name") pkgs+=("$pkg") keys+=("$key")
    fi
  done
  [ ${#stale[@]} -gt 0 ] || return 0
  (cd "$HERE/go/$dir" && go build -mod=readonly -buildvcs=false -p "$GO_PARALLEL" -trimpath -ldflags "$flags" \
    -o "$BIN/" "${pkgs[@]}") ||
    die "go build of ${stale[*]} (${pkgs[*]}) failed"
  mkdir -p "$E2E_CACHE/keys"
  for i in "${!stale[@]}"; do
    echo "${keys[$i]}" > "$E2E_CACHE/keys/${stale[$i]}"
    report "${stale[$i]}" built $(( $(date +%s) - start ))
  done
}

copy_crds() {  # NAME MODDIR MODULE SUBDIR GLOB: CRD YAML from the module's zip, replacing the cache's copy
  local name=$1 src dest=$E2E_CACHE/crds/$1 tmp start
  start=$(date +%s)
  src=$(moddir "$2" "$3")/$4
  tmp=$(mktemp -d)
  # shellcheck disable=SC2086 # the glob is meant to expand
  cp $src/$5 "$tmp"/ || die "no CRDs at $src/$5"
  chmod -R u+w "$tmp"
  if [ -d "$dest" ] && diff -rq "$tmp" "$dest" >/dev/null; then
    rm -rf "$tmp"; report "crds/$name" cached $(( $(date +%s) - start ))
  else
    rm -rf "$dest"; mkdir -p "$(dirname "$dest")"; mv "$tmp" "$dest"; chmod 755 "$dest"
    report "crds/$name" built $(( $(date +%s) - start ))
  fi
}

# A one-layer OCI archive holding bin/pause as /pause, tagged PAUSE_REF for `ctr images import` (the
# io.containerd.image.name annotation names it; org.opencontainers.image.ref.name is its tag), packed with
# umoci as scripts/build-image packs the project's image.
pause_image() {
  local out=$E2E_CACHE/images/pause.oci.tar work start
  start=$(date +%s)
  if [ -s "$out" ] && [ "$(mtime "$out")" -ge "$(mtime "$BIN/pause")" ]; then
    report images/pause.oci.tar cached $(( $(date +%s) - start )); return
  fi
  [ "$(id -u)" = 0 ] || die "packing the pause image needs root (umoci unpack/repack keep file owners)"
  bash "$HERE/../scripts/ensure-tools" umoci
  work=$(mktemp -d)
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:${PAUSE_REF##*:}"
  umoci unpack --image "$work/oci:${PAUSE_REF##*:}" "$work/bundle" >/dev/null
  install -m 0755 -o 0 -g 0 "$BIN/pause" "$work/bundle/rootfs/pause"
  umoci repack --image "$work/oci:${PAUSE_REF##*:}" "$work/bundle"
  umoci config --image "$work/oci:${PAUSE_REF##*:}" --created 1970-01-01T00:00:00Z --author "accelscore e2e/build.sh" \
    --config.user 65535:65535 --config.entrypoint /pause --config.workingdir / \
    --manifest.annotation "org.opencontainers.image.ref.name=${PAUSE_REF##*:}"
  umoci gc --layout "$work/oci"
  python3 - "$work/oci/index.json" "$PAUSE_REF" <<'EOF'
import json, sys
path, ref = sys.argv[1], sys.argv[2]
index = json.load(open(path))
for m in index["manifests"]:
    m.setdefault("annotations", {})["io.containerd.image.name"] = ref
json.dump(index, open(path, "w"))
EOF
  mkdir -p "$(dirname "$out")"
  tar -C "$work/oci" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$work"
  report images/pause.oci.tar built $(( $(date +%s) - start ))
}

# VERSIONS: one line per artifact present: name, module@version, build time (the file's, UTC).
write_versions() {
  local name dir pkg mod ver when out=$BIN/VERSIONS.tmp
  : > "$out"
  while read -r name dir pkg mod; do
    [ -n "$name" ] && [ -e "$BIN/$name" ] || continue
    if [ "$mod" = - ]; then
      ver="accelscore.local/e2e/$dir/${pkg#./}@$(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    else
      ver="$mod@$(modversion "$dir" "$mod")"
    fi
    when=$(date -u -d "@$(mtime "$BIN/$name")" +%Y-%m-%dT%H:%M:%SZ)
    printf '%-24s %-48s %s\n' "$name" "$ver" "$when" >> "$out"
  done <<< "$ARTIFACTS"
  for name in ocm-hub:ocm:open-cluster-management.io/ocm ocm-klusterlet:ocm:open-cluster-management.io/ocm \
    kueue:kueue:sigs.k8s.io/kueue kueue-webhooks:kueue:sigs.k8s.io/kueue; do
    IFS=: read -r crd dir mod <<< "$name"
    [ -d "$E2E_CACHE/crds/$crd" ] || continue
    when=$(date -u -d "@$(mtime "$E2E_CACHE/crds/$crd")" +%Y-%m-%dT%H:%M:%SZ)
    printf '%-24s %-48s %s\n' "crds/$crd" "$mod@$(modversion "$dir" "$mod")" "$when" >> "$out"
  done
  if [ -s "$E2E_CACHE/images/pause.oci.tar" ]; then
    when=$(date -u -d "@$(mtime "$E2E_CACHE/images/pause.oci.tar")" +%Y-%m-%dT%H:%M:%SZ)
    printf '%-24s %-48s %s\n' images/pause.oci.tar "$PAUSE_REF (bin/pause)" "$when" >> "$out"
  fi
  mv "$out" "$BIN/VERSIONS"
}

SELECTED=("$@")
for s in "${SELECTED[@]}"; do
  grep -qE "^$s " <<< "$ARTIFACTS" || [[ " crds image packages kueue-addon " == *" $s "* ]] ||
    die "unknown artifact '$s' (the names are in e2e/build.sh's table, plus crds, image, packages)"
done
mkdir -p "$BIN"
total=$(date +%s)

if [ "${E2E_SKIP_PACKAGES:-0}" != 1 ] && wanted packages; then
  bash "$HERE/../scripts/ensure-tools" etcd containerd ctr runc cni-loopback umoci
fi

# The wanted binaries grouped by module directory and version-stamp module, in the table's order.
declare -A GROUP=()
ORDER=()
while read -r name dir pkg mod; do
  [ -n "$name" ] || continue
  if wanted "$name" || { [ "$name" = pause ] && wanted image; }; then
    [ -n "${GROUP["$dir $mod"]+set}" ] || ORDER+=("$dir $mod")
    GROUP["$dir $mod"]+="$name $pkg"$'\n'
  fi
done <<< "$ARTIFACTS"
for group in "${ORDER[@]}"; do
  mapfile -t entries <<< "${GROUP[$group]%$'\n'}"
  # shellcheck disable=SC2086 # "$dir $mod": two words
  build_group $group "${entries[@]}"
done

if wanted kueue-addon; then
  # open-cluster-management.io/addon-contrib/kueue-addon: every tag (v0.1.1, v0.1.2, v0.1.4) and the newest
  # commit answered 403 from the Go module proxy on 2026-11-27 (docs/e2e.md). The harness writes the
  # MultiKueueConfig kueue-addon would write.
  report kueue-addon "absent" 0
fi

if wanted crds; then
  copy_crds ocm-hub ocm open-cluster-management.io/ocm manifests/cluster-manager/hub/crds '*.crd.yaml'
  copy_crds ocm-klusterlet ocm open-cluster-management.io/ocm manifests/klusterlet/managed '*.crd.yaml'
  copy_crds kueue kueue sigs.k8s.io/kueue config/components/crd/bases '*.yaml'
  # Kueue's webhook configurations (the harness points them at the manager on 127.0.0.1: e2e/rig/kueue.py)
  copy_crds kueue-webhooks kueue sigs.k8s.io/kueue config/components/webhook manifests.yaml
  # (Kueue's config/components/map policy is not copied: the rig applies the dispatcher component's own,
  # deploy/addon-template/components/dispatcher/clear-nominations.yaml, e2e/rig/kueue.py)
fi
if wanted image || wanted pause; then pause_image; fi

write_versions
echo "e2e/build: $E2E_CACHE ready in $(( $(date +%s) - total )) s (kueue-addon is not served: docs/e2e.md)"
