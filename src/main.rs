//! The `gpustack` binary: everything is in the library (`src/lib.rs`); this maps the
//! command's outcome to the exit code (0 ok, 1 error or refusal, 2 changes present with
//! --detailed-exitcode).

fn main() {
    std::process::exit(gpustack::cli::main());
}
