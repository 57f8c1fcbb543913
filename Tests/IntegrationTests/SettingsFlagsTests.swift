import Foundation
import GatewayService
import Testing

/// The command's flags against the settings table
/// (``ConfigurationVariable/setting``): each row's flag is one of
/// `products-gateway serve`, its help gives the row's default and range, and
/// what it is given reaches the row's variable.
@Suite struct SettingsFlagsTests {
    @Test func everyFlagsHelpGivesItsDefaultAndRange() async throws {
        let result = try await GatewayProcess.run(arguments: ["serve", "--help"])
        #expect(result.status == 0)
        // Help wraps lines; compare with the whitespace folded.
        let help = result.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for setting in ConfigurationVariable.table {
            let folded = setting.help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(help.contains("--\(setting.flag) <value> \(folded)"), "serve --help lacks the table's help of --\(setting.flag)")
        }
    }

    /// A placeholder is refused for every setting, naming it: given by its
    /// flag, it must be refused under the row's variable. (A bad
    /// `LOG_FORMAT`, which any flag overrides, stops a gateway that ignored
    /// the flag before it serves.)
    @Test(arguments: ConfigurationVariable.allCases)
    func everyFlagReachesItsVariable(variable: ConfigurationVariable) async throws {
        let setting = variable.setting
        let result = try await GatewayProcess.run(["LOG_FORMAT": "ignored-flag"], arguments: ["serve", "--\(setting.flag)=<placeholder>"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("invalid \(setting.name) (--\(setting.flag)): still holds the placeholder"), "\(result.stderr)")
    }
}
