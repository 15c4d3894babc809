import XCTest
@testable import GATTClient
