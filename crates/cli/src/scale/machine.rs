//! The machine a `limitcore bench` run measured: its cores, CPU model and clock.

use serde::Serialize;

/// What the report says about the machine.
///
/// # Examples
///
/// ```
/// use limitcore_cli::scale::Machine;
///
/// let machine = Machine::this();
/// assert!(machine.cores >= 1);
/// assert!(!machine.cpu_model.is_empty()); // "unknown" where the OS does not say
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// Cores this process may run on (`std::thread::available_parallelism`: the CPUs in its
    /// affinity mask, within its cgroup's quota).
    pub cores: usize,
    /// The CPUs threads are pinned to, in order (thread `t` to `core_ids[t % len]`); empty
    /// where the OS does not say, and then no thread is pinned.
    pub core_ids: Vec<usize>,
    /// The CPU's model name (`/proc/cpuinfo` on Linux), or `"unknown"`.
    pub cpu_model: String,
    /// `std::env::consts::OS`.
    pub os: &'static str,
    /// `std::env::consts::ARCH`.
    pub arch: &'static str,
    /// The source of limitcore's default clock in this process: `"tsc"` or `"os"`
    /// (`limitcore::clock::MonotonicClock::source`).
    pub clock_source: String,
}

impl Machine {
    /// This machine, as this process sees it.
    pub fn this() -> Machine {
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            core_ids: super::measure::cores().iter().map(|c| c.id).collect(),
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".to_owned()),
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            clock_source: format!("{:?}", limitcore::clock::MonotonicClock::source())
                .to_lowercase(),
        }
    }
}

/// The first model name in `/proc/cpuinfo` (x86's `model name`; `Model`, `Hardware`, `cpu`
/// or `uarch` on the other architectures Linux runs on); `None` elsewhere.
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    parse_cpuinfo(&text)
}

/// The model name in the text of a `/proc/cpuinfo`.
fn parse_cpuinfo(text: &str) -> Option<String> {
    for field in ["model name", "Model", "Hardware", "cpu", "uarch"] {
        let found = text.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == field && !value.trim().is_empty()).then(|| value.trim().to_owned())
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::parse_cpuinfo;

    #[test]
    fn the_model_name_is_read_from_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(parse_cpuinfo(x86).as_deref(), Some("AMD EPYC 7B13"));
        let arm =
            "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\nModel\t\t: Raspberry Pi 4\n";
        assert_eq!(parse_cpuinfo(arm).as_deref(), Some("Raspberry Pi 4"));
        assert_eq!(parse_cpuinfo("processor : 0\n"), None);
    }
}
