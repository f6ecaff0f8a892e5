//! Rendered kinds through the binary: a priority class is planned as `render` with its YAML,
//! recorded by apply without any AWS call, written by `gpustack manifests` from state, and
//! forgotten by destroy.

use crate::harness::Env;

const STACK: &str = r#"
[stack]
name = "pc"
region = "us-west-2"

[priority_class.training]
value = 1000000
description = "Critical training on reserved capacity"

[priority_class.research]
name = "research-spot"
value = 1000
preemption_policy = "Never"
"#;

#[test]
fn priority_classes_render_record_write_and_forget_without_aws() {
    let env = Env::new();
    env.write("pc.toml", STACK);
    let plan = env.ok(&["plan", "pc.toml"]);
    assert!(plan.stdout.contains("   » priority_class.training"), "{plan:?}");
    assert!(plan.stdout.contains("         +preemptionPolicy: Never"), "{plan:?}");
    assert!(plan.stdout.contains("2 to render (gpustack manifests)."), "{plan:?}");

    env.emu.reset_requests();
    env.ok(&["apply", "pc.toml", "--auto-approve"]);
    let calls: Vec<_> = env.emu.requests();
    assert!(calls.is_empty(), "a rendered kind makes no AWS call: {calls:?}");
    assert_eq!(env.state("pc")["resources"]["priority_class.research"]["outputs"]["name"], "research-spot");
    assert!(env.ok(&["plan", "pc.toml"]).stdout.contains("No changes. 2 resources in sync."));

    env.ok(&["manifests", "pc.toml", "--out", "k8s"]);
    let first = std::fs::read_to_string(env.path("k8s/priority-classes.yaml")).unwrap();
    env.ok(&["manifests", "pc.toml", "--out", "k8s"]);
    assert_eq!(first, std::fs::read_to_string(env.path("k8s/priority-classes.yaml")).unwrap(), "byte-identical");
    assert!(
        first.starts_with(
            "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: pc-training\n"
        )
    );
    assert!(first.contains("  name: research-spot\n") && first.contains("value: 1000\n"), "{first}");
    let stream = env.ok(&["manifests", "pc.toml"]).stdout;
    assert_eq!(stream, format!("# gpustack manifests: priority-classes.yaml\n{first}"));

    // Kubernetes cannot change a PriorityClass's value: the plan says what to do.
    env.write("pc.toml", &STACK.replace("value = 1000\n", "value = 2000\n"));
    let plan = env.ok(&["plan", "pc.toml"]);
    assert!(plan.stdout.contains("-value: 1000\n") && plan.stdout.contains("+value: 2000\n"), "{plan:?}");
    assert!(plan.stdout.contains("kubectl delete priorityclass research-spot"), "{plan:?}");

    let gone = env.ok(&["destroy", "pc.toml", "--auto-approve"]);
    assert!(gone.stderr.contains("forgotten (remove it from the cluster yourself"), "{gone:?}");
    assert!(env.state("pc")["resources"].as_object().unwrap().is_empty());
}

#[test]
fn manifests_before_apply_say_to_apply_first() {
    let env = Env::new();
    env.write("pc.toml", STACK);
    let r = env.run(&["manifests", "pc.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("no state at state/pc.json: run `gpustack apply` first"), "{r:?}");
}
