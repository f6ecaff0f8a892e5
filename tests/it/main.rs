//! gpustack's integration tests: one test binary (the AWS SDKs link once).
//! Each test runs the real `gpustack` binary against its own local emulator
//! (moto's server, extended in tests/emulator/) and reads AWS back through the
//! real Rust SDK.

mod harness;

mod auto_mode;
mod aws_correct;
mod capacity;
mod cluster_options;
mod cost;
mod crash;
mod eks;
mod faults;
mod gpu_rules;
mod hyperpod;
mod image_cache;
mod import;
mod import_eks;
mod import_generate;
mod import_net;
mod karpenter;
mod karpenter_aws;
mod lifecycle;
mod locking;
mod manifests;
mod network;
mod node_bootstrap;
mod offline;
mod refresh;
mod robustness;
mod s3_state;
mod snapshots;
mod timeline;
mod validate;
mod workload_iam;
