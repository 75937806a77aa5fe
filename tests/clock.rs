//! The default clock's choice of source ([`ClockSource`]) and both sources at work.

use limitcore::clock::{Clock, ClockSource, MonotonicClock};
use std::io::Write;
use std::sync::{Arc, Barrier};

#[test]
fn the_tsc_only_where_the_kernel_uses_it_and_the_counter_is_invariant() {
    assert_eq!(ClockSource::choose(Some("tsc"), true), ClockSource::Tsc);
    assert_eq!(ClockSource::choose(Some("tsc\n"), true), ClockSource::Tsc);
    assert_eq!(ClockSource::choose(Some("tsc"), false), ClockSource::Os);
    for other in [
        "kvm-clock",
        "hpet",
        "acpi_pm",
        "xen",
        "arch_sys_counter",
        "",
        "tsc2",
    ] {
        assert_eq!(
            ClockSource::choose(Some(other), true),
            ClockSource::Os,
            "{other:?}"
        );
    }
    assert_eq!(ClockSource::choose(None, true), ClockSource::Os);
}

/// `detect_from` reads the kernel's answer from a file: the two branches through real files,
/// and a missing file as "unknown".
#[test]
fn detection_reads_the_clocksource_file() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        path
    };
    let tsc = write("tsc", "tsc\n");
    let kvm = write("kvm", "kvm-clock\n");
    // The TSC branch needs this CPU's invariant counter too: whatever it has, the file alone
    // never picks the TSC where the kernel named another clocksource.
    let with_counter = ClockSource::detect_from(&tsc);
    assert_eq!(
        with_counter,
        ClockSource::choose(Some("tsc"), with_counter == ClockSource::Tsc)
    );
    assert_eq!(ClockSource::detect_from(&kvm), ClockSource::Os);
    assert_eq!(
        ClockSource::detect_from(&dir.path().join("missing")),
        ClockSource::Os
    );
}

/// On Linux the process-wide choice is the file's verdict.
#[cfg(target_os = "linux")]
#[test]
fn the_process_choice_follows_the_kernel() {
    let kernel = std::path::Path::new(ClockSource::LINUX_CLOCKSOURCE);
    assert_eq!(MonotonicClock::source(), ClockSource::detect_from(kernel));
    assert_eq!(MonotonicClock::new().reads(), MonotonicClock::source());
}

/// Both sources count from one epoch and advance with real time; the OS source never goes
/// back across threads: a reading taken after another thread's (ordered by a barrier) is
/// at least as late.
#[test]
fn both_sources_share_the_epoch_and_never_go_back_across_threads() {
    let tsc = MonotonicClock::with_source(ClockSource::Tsc);
    let os = MonotonicClock::with_source(ClockSource::Os);
    assert_eq!(os.reads(), ClockSource::Os);
    // The TSC's reading between two of the OS clock's: within 50 ms of that interval (the
    // epochs and the TSC's calibration agree that well), however long a preemption made it.
    let (before, a, b) = (os.now(), tsc.now(), os.now());
    assert!(
        a + 50_000_000 > before && a < b + 50_000_000,
        "tsc {a} ns, os {before}..{b} ns"
    );
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(os.now() >= b + 5_000_000);

    let barrier = Arc::new(Barrier::new(2));
    for _ in 0..200 {
        let (clock, gate) = (os.clone(), Arc::clone(&barrier));
        let first = std::thread::spawn(move || {
            let t = clock.now();
            gate.wait();
            t
        });
        barrier.wait();
        let later = os.now();
        let earlier = first.join().unwrap();
        assert!(later >= earlier, "{later} < {earlier}");
    }
}
