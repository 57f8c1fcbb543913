import CGatewayShims

/// The process's open-file limit (`RLIMIT_NOFILE`).
public enum OpenFileLimit {
    /// Raises the soft limit to `wanted` when the hard limit allows, as far
    /// as it allows otherwise; returns the soft limit in force afterwards.
    @discardableResult
    public static func raise(toAtLeast wanted: Int) -> Int {
        var after = 0
        _ = gw_raise_open_file_limit(wanted, &after)
        return after
    }
}
