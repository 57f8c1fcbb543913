import ArgumentParser
import GatewayService

/// `products-gateway`: the Onside products gateway.
@main
struct ProductsGatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "products-gateway",
        abstract: "Serves Onside in-app product details over JSON-RPC 2.0 (POST /rpc, method products.fetch).",
        discussion: "Every flag has an environment variable of the same meaning; a flag wins over its variable.",
        version: GatewayVersion.current,
        subcommands: [ServeCommand.self],
        defaultSubcommand: ServeCommand.self
    )
}
