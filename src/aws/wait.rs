//! Waiting for AWS to finish long work (an EKS cluster takes ~10 minutes). A wait
//! holds no concurrency slot: each probe takes one for its call only, so other
//! resources' calls go on meanwhile. [`until_status`] is the usual wait: describe an
//! object until its status says done; [`until`] is for probes that are not a describe.

use std::future::Future;
use std::time::{Duration, Instant};

use super::AwsError;

/// What one probe saw.
pub enum Poll<T> {
    Done(T),
    /// Not yet; the status AWS reports (for the timeout message).
    Pending(String),
}

/// Probes until `probe` says done, fails, or `timeout` passes. Probes start 0.25 s apart
/// and back off to 15 s (`GPUSTACK_POLL_MAX_SECONDS` lowers the cap), so short waits
/// end promptly and long ones cost few calls.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T, AwsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Poll<T>, AwsError>>,
{
    let cap = crate::settings::get().poll_max;
    let started = Instant::now();
    let mut pause = Duration::from_millis(250).min(cap);
    loop {
        match probe().await? {
            Poll::Done(t) => return Ok(t),
            Poll::Pending(status) if started.elapsed() >= timeout => {
                return Err(AwsError {
                    operation: "waiting",
                    code: Some("Timeout".into()),
                    detail: format!(
                        "{what} is still {status} after {}s; it may yet finish: run `gpustack plan` later to see where it stands",
                        started.elapsed().as_secs()
                    ),
                });
            }
            Poll::Pending(_) => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(cap);
    }
}

/// What a wait makes of one look at the object it waits for.
pub enum Status<T> {
    /// Where the wait wanted it: the wait ends with this.
    Reached(T),
    /// It will not get there: the wait ends with this error.
    Failed(AwsError),
    /// On its way; AWS's word for where it stands (the timeout message names it).
    Pending(String),
}

/// Describes an object again and again until `status` says it got where the wait wants it
/// (running, available, deleted), that it never will, or until `timeout` passes. `describe`
/// answers None for an object AWS does not know (gone, or not visible yet): `status` says
/// what that means too. Backs off as [`until`] does and holds no slot between looks.
pub async fn until_status<T, R, F, Fut>(
    what: &str,
    timeout: Duration,
    mut describe: F,
    status: impl Fn(Option<T>) -> Status<R>,
) -> Result<R, AwsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, AwsError>>,
{
    let status = &status;
    until(what, timeout, move || {
        let seen = describe();
        async move {
            match status(seen.await?) {
                Status::Reached(r) => Ok(Poll::Done(r)),
                Status::Failed(e) => Err(e),
                Status::Pending(word) => Ok(Poll::Pending(word)),
            }
        }
    })
    .await
}
