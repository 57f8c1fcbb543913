import ArgumentParser
import GatewayService

/// `products-gateway`: the Onside products gateway.
@main
struct ProductsGatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "products-gateway",
        abstract: "Serves Onside in-app product details over JSON-RPC 2.0 (POST /rpc, method products.fetch).",
        discussion: Self.flagSummary,
        version: GatewayVersion.current,
        subcommands: [ServeCommand.self],
        defaultSubcommand: ServeCommand.self
    )

    /// Every flag with its variable and default, from the settings table.
    /// The flags belong to `serve`, but `products-gateway --help` shows only
    /// this command's help, and an operator should find them there too.
    static var flagSummary: String {
        let lines = ConfigurationVariable.table.map { setting in
            "  --\(setting.flag) <value>  Env: \(setting.name). Default: \(setting.defaultValue)."
        }
        return """
        Every flag has an environment variable of the same meaning; a flag wins over its variable. \
        The flags belong to serve, which runs when no subcommand is given; 'products-gateway help serve' explains each.

        FLAGS:
        \(lines.joined(separator: "\n"))
        """
    }
}
