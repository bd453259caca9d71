from responses_gateway.cli import main

main()
