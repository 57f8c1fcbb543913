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

    /// Every flag with its variable and default. The flags belong to `serve`,
    /// but `products-gateway --help` shows only this command's help, and an
    /// operator should find them there too.
    static var flagSummary: String {
        let lines = ConfigurationVariable.allCases.map { variable in
            "  --\(variable.flag) <value>  Env: \(variable.rawValue). Default: \(variable.defaultDescription)."
        }
        return """
        Every flag has an environment variable of the same meaning; a flag wins over its variable. \
        The flags belong to serve, which runs when no subcommand is given; 'products-gateway help serve' explains each.

        FLAGS:
        \(lines.joined(separator: "\n"))
        """
    }
}
