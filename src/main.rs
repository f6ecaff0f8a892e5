//! gpustack: provision GPU-ready Amazon EKS environments from a declarative TOML
//! stack file. This file only parses the command line, runs the command and
//! maps the outcome to an exit code (0 ok, 1 error or refusal, 2 changes present
//! with --detailed-exitcode).

mod aws;
mod cli;
mod engine;
mod graph;
mod plan;
mod policy;
mod quota;
mod resources;
mod rules;
mod settings;
mod stack;
mod state;
mod value;

fn main() {
    std::process::exit(cli::main());
}
