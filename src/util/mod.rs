//! Small self-contained helpers; each submodule has one concern. (filled by the runtime work)
