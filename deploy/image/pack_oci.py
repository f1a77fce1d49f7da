#!/usr/bin/env python3
"""Packs a root filesystem into an OCI image layout (one gzip layer), the
form registries, skopeo, podman and containerd import, without a container
engine:

    deploy/image/pack_oci.py ROOTFS OUT_DIR [--tag braidd-cpu:0.1.0] [--env K=V ...]

then, for example, `skopeo copy oci:OUT_DIR:0.1.0 docker://REGISTRY/braid/braidd-cpu:0.1.0`.
The image runs braidd as user 10001 with the ports of docs/OPERATIONS.md;
--env adds to its environment (the GPU image: NVIDIA_VISIBLE_DEVICES and
NVIDIA_DRIVER_CAPABILITIES, which the NVIDIA container toolkit reads).
The layer is reproducible: files sorted, times and names normalised.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile

PORTS = ["50051/tcp", "8080/tcp", "9464/tcp", "9465/tcp"]


def blob(out, data, media_type):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(out, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return {"mediaType": media_type, "digest": "sha256:" + digest,
            "size": len(data)}


def layer_tar(rootfs):
    """The rootfs as an uncompressed tar (sorted; mtimes 0, owners kept)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in dirnames + sorted(filenames):
                path = os.path.join(dirpath, name)
                info = tar.gettarinfo(path, os.path.relpath(path, rootfs))
                info.mtime = 0
                info.uname = info.gname = ""
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rootfs")
    p.add_argument("out")
    p.add_argument("--tag", default="braidd-cpu:0.1.0")
    p.add_argument("--env", action="append", default=[],
                   help="KEY=VALUE in the image's environment (repeatable)")
    args = p.parse_args()
    name, _, tag = args.tag.partition(":")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.join(args.out, "blobs", "sha256"))
    raw = layer_tar(args.rootfs)
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    layer = blob(args.out, gzip.compress(raw, compresslevel=6, mtime=0),
                 "application/vnd.oci.image.layer.v1.tar+gzip")
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": "10001:10001",
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                    "/sbin:/bin"] + args.env,
            "Entrypoint": ["/usr/local/bin/braidd"],
            "Cmd": ["--flagfile=/etc/braid/braidd.conf"],
            "ExposedPorts": {port: {} for port in PORTS},
            "WorkingDir": "/",
            "Labels": {"org.opencontainers.image.title": name},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "deploy/image/build_rootfs.sh"}],
    }
    cfg = blob(args.out, json.dumps(config, sort_keys=True).encode(),
               "application/vnd.oci.image.config.v1+json")
    manifest = blob(args.out, json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": cfg, "layers": [layer]}, sort_keys=True).encode(),
        "application/vnd.oci.image.manifest.v1+json")
    manifest["annotations"] = {"org.opencontainers.image.ref.name": tag or "latest"}
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [manifest]}, f)
    with open(os.path.join(args.out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    print(f"{args.out}: {name}:{tag}, layer {layer['size'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
