//! fake-dsh: the user's official `dsh` with the open-design profile, as far as a host can see,
//! with no model, key or network.

pub mod locate;
