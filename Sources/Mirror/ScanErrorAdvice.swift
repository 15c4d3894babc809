// What each scanError the mirror's APK names (INVALID(0) ... SCALE_ALIGNMENT(11)) usually means and what to do, for a
// failed scan's message: by name, so a profile with other bytes for the same errors gets the same words.

/// The meaning and the advice for a scanError name; nil for names this table does not know (invalid, noError, an
/// unknown byte).
public struct ScanErrorAdvice: Sendable, Equatable {
    public var meaning: String
    public var advice: String

    public static func forName(_ name: String) -> ScanErrorAdvice? {
        switch name {
        case "scaleNotDetected":
            return .init(meaning: "the mirror does not detect its scale",
                         advice: "check that the scale is powered and paired with the mirror, then scan again")
        case "scaleNotLevel":
            return .init(meaning: "the scale is not level", advice: "put the scale on a flat, level floor, then scan again")
        case "mirrorNotLevel":
            return .init(meaning: "the mirror is not level", advice: "level the mirror (its stand or wall mount), then scan again")
        case "processorBusy":
            return .init(meaning: "the mirror cannot process a scan now; usually its Wi-Fi is down, so the cloudToken (the upload URL) is unusable",
                         advice: "check its Wi-Fi with `mirror wifi status TARGET` and connect it (`mirror wifi join TARGET SSID`), then scan again")
        case "internalError":
            return .init(meaning: "the mirror reported an internal error",
                         advice: "reboot the mirror (`mirror write TARGET scannerAction 33`, its reboot command), then scan again")
        case "scaleAlignment":
            return .init(meaning: "the scale is not where the mirror expects it",
                         advice: "align the scale with the mirror's floor marks, then scan again")
        default:
            return nil
        }
    }
}
