//! `image_cache`: a Bottlerocket data-volume snapshot built through SSM on one builder
//! instance, read back from the emulator: the happy path, a failing pull (clean up,
//! nothing recorded), a replace on an image-list change (new snapshot first, the
//! template moved, the old one deleted), destroy.

use crate::harness::{Env, block_on};

fn cache_stack(images: &[&str]) -> String {
    let list = images.iter().map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(", ");
    format!(
        r#"[stack]
name   = "cache"
region = "us-west-2"

[vpc.main]
cidr_block       = "10.8.0.0/16"
internet_gateway = true

[subnet.public]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.8.0.0/20"
availability_zone = "us-west-2a"
public            = true

[iam_role.builder]
service          = "ec2.amazonaws.com"
instance_profile = true
managed_policies = [
  "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
  "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
]

[image_cache.ml]
images                   = [{list}]
variant                  = "aws-k8s-1.31-nvidia"
volume_size_gib          = 60
subnet                   = "${{subnet.public.id}}"
builder_instance_profile = "${{iam_role.builder.instance_profile}}"

[launch_template.gpu]
instance_type = "g6.xlarge"
data_volume   = {{ size_gib = 100, snapshot = "${{image_cache.ml.snapshot_id}}" }}
"#
    )
}

/// (instance id, state) of every builder, and the volumes tagged for the stack that still exist.
fn leftovers(env: &Env) -> (Vec<(String, String)>, Vec<String>) {
    let ec2 = env.emu.ec2();
    block_on(async move {
        let f = |k: &str, v: &str| aws_sdk_ec2::types::Filter::builder().name(k).values(v).build();
        let inst =
            ec2.describe_instances().filters(f("tag:gpustack:role", "image-cache-builder")).send().await.unwrap();
        let builders = inst
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| (i.instance_id().unwrap().to_string(), i.state().unwrap().name().unwrap().as_str().to_string()))
            .collect();
        let vols = ec2.describe_volumes().filters(f("tag:gpustack:stack", "cache")).send().await.unwrap();
        (builders, vols.volumes().iter().map(|v| v.volume_id().unwrap().to_string()).collect())
    })
}

/// Snapshots tagged for the stack: (id, state).
fn snapshots(env: &Env) -> Vec<(String, String)> {
    let ec2 = env.emu.ec2();
    block_on(async move {
        let f = aws_sdk_ec2::types::Filter::builder().name("tag:gpustack:stack").values("cache").build();
        let out = ec2.describe_snapshots().owner_ids("self").filters(f).send().await.unwrap();
        out.snapshots()
            .iter()
            .map(|s| (s.snapshot_id().unwrap().to_string(), s.state().unwrap().as_str().to_string()))
            .collect()
    })
}

/// The snapshot on /dev/xvdb of the template's default version.
fn template_snapshot(env: &Env) -> String {
    let id = env.state("cache")["resources"]["launch_template.gpu"]["id"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    block_on(async move {
        let v =
            ec2.describe_launch_template_versions().launch_template_id(id).versions("$Default").send().await.unwrap();
        let bdm = v.launch_template_versions()[0].launch_template_data().unwrap().block_device_mappings().to_vec();
        assert_eq!(bdm.len(), 1, "only /dev/xvdb: {bdm:?}");
        assert_eq!(bdm[0].device_name(), Some("/dev/xvdb"));
        bdm[0].ebs().unwrap().snapshot_id().unwrap().to_string()
    })
}

/// The shell commands the builder was sent, in order.
fn commands(env: &Env) -> Vec<String> {
    let v = env.emu.control("GET", "/_gpustack/ssm/commands");
    let list = v.as_array().cloned().or_else(|| v["commands"].as_array().cloned()).unwrap_or_default();
    list.iter()
        .flat_map(|c| c["commands"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect()
}

#[test]
fn an_image_cache_builds_a_tagged_snapshot_and_leaves_nothing_behind() {
    let env = Env::new();
    env.write(
        "c.toml",
        &cache_stack(&["public.ecr.aws/docker/library/busybox:1.36", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"]),
    );
    let apply = env.ok(&["apply", "c.toml", "--auto-approve"]);
    // Progress names each step and image.
    for step in [
        "waiting for",
        "stopping kubelet",
        "pulling image 1/2: public.ecr.aws/docker/library/busybox:1.36",
        "pulling image 2/2",
        "snapshotting /dev/xvdb",
        "terminating the builder",
    ] {
        assert!(apply.stderr.contains(step), "progress shows {step:?}: {apply:?}");
    }
    let st = env.state("cache");
    let cache = &st["resources"]["image_cache.ml"];
    let snap = cache["outputs"]["snapshot_id"].as_str().unwrap().to_string();
    assert!(snap.starts_with("snap-"), "{st}");
    assert_eq!(cache["inputs"]["bottlerocket_version"], "latest");
    assert!(cache["outputs"]["bottlerocket_version"].as_str().unwrap().starts_with("1."), "pinned: {st}");

    assert_eq!(snapshots(&env), vec![(snap.clone(), "completed".to_string())]);
    let (builders, volumes) = leftovers(&env);
    assert_eq!(builders.len(), 1, "{builders:?}");
    assert_eq!(builders[0].1, "terminated");
    assert!(volumes.is_empty(), "no stray volumes: {volumes:?}");
    assert_eq!(template_snapshot(&env), snap);

    let cmds = commands(&env);
    assert!(cmds[0].contains("systemctl stop kubelet"), "{cmds:?}");
    assert!(
        cmds[1].contains("images pull") && cmds[1].ends_with("public.ecr.aws/docker/library/busybox:1.36"),
        "{cmds:?}"
    );
    assert!(
        cmds[2].contains("--platform linux/amd64") && cmds[2].ends_with("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"),
        "{cmds:?}"
    );
    assert_eq!(env.run(&["plan", "c.toml", "--detailed-exitcode"]).code, 0, "in sync");

    // A changed image list: the new snapshot first, the template moved to it, the old one deleted.
    env.write("c.toml", &cache_stack(&["public.ecr.aws/docker/library/busybox:1.37"]));
    let plan = env.ok(&["plan", "c.toml"]);
    assert!(plan.stdout.contains("+/- image_cache.ml"), "{plan:?}");
    assert!(plan.stdout.contains("~ launch_template.gpu"), "{plan:?}");
    env.ok(&["apply", "c.toml", "--auto-approve"]);
    let new = env.state("cache")["resources"]["image_cache.ml"]["outputs"]["snapshot_id"].as_str().unwrap().to_string();
    assert_ne!(new, snap);
    assert_eq!(snapshots(&env), vec![(new.clone(), "completed".to_string())], "the old snapshot is deleted");
    assert_eq!(template_snapshot(&env), new);

    env.ok(&["destroy", "c.toml", "--auto-approve"]);
    assert!(snapshots(&env).is_empty());
    assert!(leftovers(&env).0.iter().all(|(_, s)| s == "terminated"));
}

#[test]
fn a_failing_pull_names_the_image_cleans_up_and_records_nothing() {
    let env = Env::new();
    env.emu.control("POST", "/_gpustack/ssm/fail?match=registry.example.com/missing");
    env.write(
        "c.toml",
        &cache_stack(&["public.ecr.aws/docker/library/busybox:1.36", "registry.example.com/missing:1"]),
    );
    let r = env.run(&["apply", "c.toml", "--auto-approve"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains(
            "image cache build failed: while pulling image 2/2: registry.example.com/missing:1 (SendCommand failed"
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("the builder i-") && r.stdout.contains("was terminated"), "{r:?}");
    assert!(r.stdout.contains("no snapshot was recorded"), "{r:?}");
    assert!(r.stdout.contains("skipped  launch_template.gpu"), "{r:?}");
    let st = env.state("cache");
    assert!(st["resources"].get("image_cache.ml").is_none(), "{st}");
    assert!(snapshots(&env).is_empty());
    let (builders, volumes) = leftovers(&env);
    assert!(builders.iter().all(|(_, s)| s == "terminated"), "{builders:?}");
    assert!(volumes.is_empty(), "{volumes:?}");

    // Fixed: the next apply builds it.
    env.emu.control("POST", "/_gpustack/ssm/fail?clear=1");
    env.write("c.toml", &cache_stack(&["public.ecr.aws/docker/library/busybox:1.36"]));
    env.ok(&["apply", "c.toml", "--auto-approve"]);
    assert_eq!(snapshots(&env).len(), 1);
}

/// Audit 2026-11 #14, #19, #9: the builder boots the plain Bottlerocket variant (an NVIDIA
/// variant never comes online without a GPU), and a private ECR image is pulled with a
/// password the builder fetches itself, from the image's region: no ECR token is requested
/// by gpustack and none is part of any SSM command.
#[test]
fn the_builder_boots_the_plain_variant_and_ecr_passwords_never_reach_ssm() {
    let env = Env::new();
    let ecr = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/train:1";
    env.write("c.toml", &cache_stack(&[ecr]));
    env.ok(&["apply", "c.toml", "--auto-approve"]);
    let cmds = commands(&env);
    let pull = cmds.iter().find(|c| c.contains("train:1")).expect("a pull of the ECR image");
    assert!(pull.contains("/usr/libexec/kubernetes/kubelet/plugins/ecr-credential-provider"), "{pull}");
    assert!(pull.contains(r#"--user "AWS:$PW""#), "the password stays a shell variable on the builder: {pull}");
    assert!(!env.emu.requests().iter().any(|(_, a)| a == "GetAuthorizationToken"), "gpustack asks ECR for nothing");

    let ssm = env.emu.ssm();
    let plain = block_on(async move {
        ssm.get_parameter()
            .name("/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id")
            .send()
            .await
            .unwrap()
            .parameter()
            .unwrap()
            .value()
            .unwrap()
            .to_string()
    });
    let ec2 = env.emu.ec2();
    let images = block_on(async move {
        let f = aws_sdk_ec2::types::Filter::builder().name("tag:gpustack:role").values("image-cache-builder").build();
        let out = ec2.describe_instances().filters(f).send().await.unwrap();
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| i.image_id().unwrap().to_string())
            .collect::<Vec<_>>()
    });
    assert_eq!(images, vec![plain], "the builder runs aws-k8s-1.31, not aws-k8s-1.31-nvidia");
}
