//! Undo on failure: an ADD registers how to undo each step it completed; if the ADD fails
//! the steps are undone in reverse order, every one of them even when some fail.
//!
//! This is what makes "any failure after IPAM ADD releases the address and removes what
//! this ADD created" hold on every path, including early returns with `?`.

type Step<'a> = Box<dyn FnOnce() -> Result<(), String> + 'a>;

#[derive(Default)]
pub struct Rollback<'a> {
    steps: Vec<(String, Step<'a>)>,
    armed: bool,
}

impl<'a> Rollback<'a> {
    pub fn new() -> Self {
        Rollback {
            steps: Vec::new(),
            armed: true,
        }
    }

    /// Remember how to undo a completed step; `what` names it in error reports.
    pub fn push(&mut self, what: impl Into<String>, undo: impl FnOnce() -> Result<(), String> + 'a) {
        self.steps.push((what.into(), Box::new(undo)));
    }

    /// The ADD succeeded: keep everything.
    pub fn commit(mut self) {
        self.armed = false;
        self.steps.clear();
    }

    /// Undo now, newest step first; returns the failures (also logged to stderr).
    pub fn undo(&mut self) -> Vec<String> {
        let mut failures = vec![];
        while let Some((what, step)) = self.steps.pop() {
            if let Err(e) = step() {
                eprintln!("cnibox: cleanup after failed ADD: {what}: {e}");
                failures.push(format!("{what}: {e}"));
            }
        }
        failures
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.undo();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn undoes_in_reverse_and_keeps_going_after_a_failure() {
        let log = RefCell::new(vec![]);
        {
            let mut rb = Rollback::new();
            rb.push("one", || {
                log.borrow_mut().push(1);
                Ok(())
            });
            rb.push("two", || {
                log.borrow_mut().push(2);
                Err("boom".into())
            });
            rb.push("three", || {
                log.borrow_mut().push(3);
                Ok(())
            });
        }
        assert_eq!(*log.borrow(), vec![3, 2, 1]);
    }

    #[test]
    fn commit_keeps_everything() {
        let log = RefCell::new(vec![]);
        let mut rb = Rollback::new();
        rb.push("one", || {
            log.borrow_mut().push(1);
            Ok(())
        });
        rb.commit();
        assert!(log.borrow().is_empty());
    }
}
