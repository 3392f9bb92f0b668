//! DEL keeps going: every step is attempted whatever failed before it, each failure is
//! logged, and the first one is returned unchanged (so an IPAM plugin's error object
//! reaches the runtime as it was).
use crate::cni::Error;

pub struct Teardown {
    plugin: &'static str,
    first: Option<Error>,
}

impl Teardown {
    pub fn new(plugin: &'static str) -> Self {
        Teardown { plugin, first: None }
    }

    /// Record the outcome of one step.
    pub fn step<T, E: Into<Error>>(&mut self, r: Result<T, E>) {
        if let Err(e) = r {
            let e = e.into();
            eprintln!("cnibox {}: DEL: {}", self.plugin, e.msg);
            self.first.get_or_insert(e);
        }
    }

    pub fn finish(self) -> Result<(), Error> {
        self.first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_error_wins_and_later_steps_still_count() {
        let mut t = Teardown::new("test");
        t.step(Ok::<(), Error>(()));
        t.step(Err::<(), Error>(Error::new(11, "try later")));
        t.step(Err::<(), Error>(Error::internal("second")));
        let e = t.finish().unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (11, "try later"));
        assert!(Teardown::new("test").finish().is_ok());
    }
}
