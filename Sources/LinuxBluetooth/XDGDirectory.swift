// The XDG Base Directory rule in one place: the shell's history (state) and the GATT cache (cache).
import Glibc

/// A base directory of the XDG Base Directory specification, with mirror's folder in it.
public enum XDGDirectory: Sendable {
    /// $XDG_STATE_HOME, else ~/.local/state.
    case state
    /// $XDG_CACHE_HOME, else ~/.cache.
    case cache

    var variable: String { self == .state ? "XDG_STATE_HOME" : "XDG_CACHE_HOME" }
    var underHome: String { self == .state ? "/.local/state" : "/.cache" }

    /// `$VARIABLE/mirror`, or `$HOME/<default>/mirror` when the variable is unset or not absolute (the spec's
    /// rule); nil without either.
    public func mirrorDirectory(environment: (String) -> String? = XDGDirectory.environment) -> String? {
        if let base = environment(variable), base.hasPrefix("/") { return base + "/mirror" }
        if let home = environment("HOME"), !home.isEmpty { return home + underHome + "/mirror" }
        return nil
    }

    /// getenv(3).
    public static func environment(_ name: String) -> String? {
        guard let p = getenv(name) else { return nil }
        return String(cString: p)
    }
}
