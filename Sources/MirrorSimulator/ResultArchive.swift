// What the simulated mirror posts when a scan completes: a result ZIP with a small PLY mesh and a
// measurements JSON, the shape of a real mirror's finished result.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Mirror

/// The simulator's result archive: mesh.ply (an octahedron, ASCII PLY) and measurements.json.
public enum ResultArchive {
    /// The ZIP the simulator posts for `scanID`.
    public static func zip(scanID: String) -> [UInt8] {
        ZIPArchive.stored([("mesh.ply", Array(mesh.utf8)), ("measurements.json", Array(measurements(scanID: scanID).utf8))])
    }

    /// The body `--result` asks for.
    public static func body(_ result: SimResult, scanID: String) -> [UInt8] {
        switch result {
        case .zip: return zip(scanID: scanID)
        case .junk: return Array(junk.utf8)
        case .partial: return ZIPArchive.stored([("mesh.ply", Array(mesh.utf8))])
        }
    }

    /// 42 bytes that are not a ZIP archive.
    public static let junk = "not a ZIP archive: 42 bytes of plain text\n"

    /// An ASCII PLY octahedron: 6 vertices, 8 triangles.
    public static let mesh = """
        ply
        format ascii 1.0
        comment mirror-sim result mesh
        element vertex 6
        property float x
        property float y
        property float z
        element face 8
        property list uchar int vertex_indices
        end_header
        0 0 1
        1 0 0
        0 1 0
        -1 0 0
        0 -1 0
        0 0 -1
        3 0 1 2
        3 0 2 3
        3 0 3 4
        3 0 4 1
        3 5 2 1
        3 5 3 2
        3 5 4 3
        3 5 1 4

        """

    /// The measurements JSON, naming the scan.
    public static func measurements(scanID: String) -> String {
        #"{"scanID":"\#(scanID)","source":"mirror-sim","units":"cm","chest":96.5,"waist":81.2,"hips":99.8,"height":178.0}"#
    }
}

/// The simulator's HTTP client: one POST of the result to the cloudToken URL (FoundationNetworking).
enum HTTPPoster {
    enum Failure: Error, CustomStringConvertible {
        case transport(String)
        var description: String { if case .transport(let s) = self { return s }; return "" }
    }

    static func post(_ body: [UInt8], to url: URL) async -> Result<Int, Failure> {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/zip", forHTTPHeaderField: "Content-Type")
        request.timeoutInterval = 30
        do {
            let (_, response) = try await URLSession.shared.upload(for: request, from: Data(body))
            guard let http = response as? HTTPURLResponse else { return .failure(.transport("not an HTTP response")) }
            return .success(http.statusCode)
        } catch {
            return .failure(.transport("\(error.localizedDescription)"))
        }
    }
}
